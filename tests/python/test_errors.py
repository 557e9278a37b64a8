"""heddle.errors: the exception classes (made by the native core, re-exported by
heddle.errors and heddle), their hierarchy, and the class every variant of every Rust
error is raised as (``heddle._heddle._error_mapping()``, one sample per variant)."""

import builtins

import pytest

import heddle
import heddle._heddle as native
from heddle import errors

#: The class a sample of each variant must be raised as: the reference, written here
#: rather than taken from the Rust code. A variant that wraps another layer's error maps as
#: the wrapped sample does (named in the comment).
EXPECTED = {
    ("comm", "Io"): errors.CommError,
    ("comm", "Wire"): errors.CommError,
    ("comm", "PeerLost"): errors.WorkerFailed,
    ("comm", "Timeout"): errors.TimeoutError,
    ("comm", "Truncated"): errors.CommError,
    ("comm", "CollectiveMismatch"): errors.ArgumentError,
    ("comm", "TypeMismatch"): errors.ArgumentError,
    ("comm", "InvalidArgument"): errors.ArgumentError,
    ("comm", "Config"): errors.ConfigError,
    ("comm", "NotPrivate"): errors.CommError,
    ("comm", "Aborted"): errors.JobAborted,
    ("comm", "Serialization"): errors.CommError,
    ("dataflow", "Comm"): errors.WorkerFailed,  # a lost peer
    ("dataflow", "InvalidArgument"): errors.ArgumentError,
    ("dataflow", "Serialization"): errors.CommError,
    ("dataflow", "Io"): errors.CommError,
    ("runtime", "Io"): errors.CommError,
    ("runtime", "Comm"): errors.ConfigError,  # a bad setting
    ("runtime", "Env"): errors.ConfigError,
    ("runtime", "Auth"): errors.CommError,
    ("runtime", "Refused"): errors.CommError,
    ("runtime", "Protocol"): errors.CommError,
    ("runtime", "Timeout"): errors.TimeoutError,
    ("runtime", "Spawn"): errors.LaunchError,
    ("task", "Graph"): errors.GraphError,
    ("task", "Plan"): errors.PlanError,
    ("task", "Task"): errors.TaskError,
    ("task", "Raised"): errors.DataError,  # a data source's malformed row, itself again
    ("task", "Aborted"): KeyboardInterrupt,
    ("task", "Checkpoint"): errors.DataError,  # a checkpoint that cannot be resumed from
    ("task", "Comm"): errors.TimeoutError,  # a timeout
    ("task", "Dataflow"): errors.ArgumentError,  # bad input to an operation
    ("data", "InvalidArgument"): errors.ArgumentError,
    ("data", "Io"): errors.DataError,
    ("data", "Parse"): errors.DataError,
    ("data", "Changed"): errors.DataError,
    ("data", "Task"): errors.PlanError,  # a graph that cannot be placed
    ("data", "Comm"): errors.JobAborted,  # a job-wide abort
}

#: Variants deliberately raised as a builtin exception, not a HeddleError: a job stopped by
#: Ctrl-C raises what Python's SIGINT handler raises (KeyboardInterrupt by default).
BUILTIN = {("task", "Aborted")}

LAYERS = {"comm", "dataflow", "runtime", "task", "data"}

NAMES = [
    "HeddleError",
    "ConfigError",
    "ArgumentError",
    "CommError",
    "TimeoutError",
    "WorkerFailed",
    "LaunchError",
    "GraphError",
    "PlanError",
    "TaskError",
    "DataError",
    "JobAborted",
]


@pytest.fixture(scope="module")
def mapping():
    return native._error_mapping()


def test_every_variant_of_every_layer_has_a_sample_and_a_class(mapping):
    missing = [(layer, variant) for layer, variant, cls in mapping if cls is None]
    assert not missing, f"variants without a sample in error_samples.rs: {missing}"
    keys = [(layer, variant) for layer, variant, _ in mapping]
    assert len(keys) == len(set(keys)), "one sample per variant"
    assert {layer for layer, _ in keys} == LAYERS


def test_every_class_is_a_heddle_error_unless_deliberately_builtin(mapping):
    for layer, variant, cls in mapping:
        if (layer, variant) in BUILTIN:
            assert not issubclass(cls, heddle.HeddleError), (layer, variant, cls)
        else:
            assert issubclass(cls, heddle.HeddleError), (layer, variant, cls)


def test_each_variant_maps_to_the_expected_class(mapping):
    got = {(layer, variant): cls for layer, variant, cls in mapping}
    # A variant added in Rust must be added here too: the table is the reference.
    assert set(got) == set(EXPECTED), set(got) ^ set(EXPECTED)
    wrong = {k: (got[k], want) for k, want in EXPECTED.items() if got[k] is not want}
    assert not wrong, wrong


def test_the_classes_are_the_native_ones_everywhere():
    assert errors.__all__ == NAMES
    for name in NAMES:
        cls = getattr(native, name)
        assert getattr(errors, name) is cls and getattr(heddle, name) is cls, name
        assert cls.__module__ == "heddle.errors" and cls.__name__ == name
        assert cls.__doc__, name
        assert name in heddle.__all__


def test_the_hierarchy_and_its_builtin_mixins():
    e = errors
    assert issubclass(e.HeddleError, Exception) and not issubclass(e.HeddleError, ValueError)
    for cls in (e.ConfigError, e.ArgumentError, e.CommError, e.LaunchError, e.GraphError):
        assert cls.__bases__[0] is e.HeddleError
    for cls in (e.PlanError, e.TaskError, e.DataError, e.JobAborted):
        assert cls.__bases__ == (e.HeddleError,)
    assert e.TimeoutError.__bases__ == (e.CommError, builtins.TimeoutError)
    assert e.WorkerFailed.__bases__ == (e.CommError,)
    assert e.ConfigError.__bases__ == (e.HeddleError, ValueError)
    assert e.ArgumentError.__bases__ == (e.HeddleError, ValueError, TypeError)
    assert e.GraphError.__bases__ == (e.HeddleError, ValueError)
    assert not issubclass(e.DataError, ValueError) and not issubclass(e.CommError, OSError)
    # User code catching the builtin errors still catches Heddle's.
    with pytest.raises(ValueError):
        raise e.ArgumentError("bad root")
    with pytest.raises(TypeError):
        raise e.ArgumentError("bad dtype")
    with pytest.raises(builtins.TimeoutError):
        raise e.TimeoutError("no progress")


def test_attributes_default_to_none_and_instances_keep_theirs():
    assert errors.WorkerFailed.rank is None
    assert (errors.JobAborted.origin, errors.JobAborted.task, errors.JobAborted.kind) == (
        None,
        None,
        None,
    )
    w = errors.WorkerFailed("rank 1 is gone")
    w.rank = 1
    assert (str(w), w.rank, errors.WorkerFailed.rank) == ("rank 1 is gone", 1, None)


def test_a_data_error_in_a_source_comes_back_as_itself(tmp_path):
    # Raised in a source task of the native data layer; the text is the data error's own,
    # naming file and line, not a task failure's.
    from heddle.data import Session

    (tmp_path / "rows.jsonl").write_text('{"a": 1}\n[1, 2\n')
    s = Session(heddle.init())
    with pytest.raises(errors.DataError) as info:
        s.read_json_lines(tmp_path / "rows.jsonl").count()
    assert str(info.value).startswith(f"{tmp_path / 'rows.jsonl'} line 2"), str(info.value)
