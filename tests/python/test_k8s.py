"""``heddle k8s manifest``: its YAML checked against the Kubernetes API models of the
``kubernetes`` package (every object must survive a round trip through its model, so a
misspelled or misplaced field fails), then its pods emulated as local processes with the
manifest's own environment and token file — rank 0 hosts the master where the others look
for it, with the pods' DNS name replaced by loopback through ``HEDDLE_MASTER``."""

import json
import os
import socket
import subprocess
import tempfile
from pathlib import Path

import yaml
from kubernetes.client import ApiClient

from conftest import job_env

ROOT = Path(__file__).resolve().parents[2]
HEDDLE = ROOT / "target" / "release" / "heddle"
COLLECTIVES = ROOT / "target" / "release" / "examples" / "collectives"
MODELS = {"Secret": "V1Secret", "Service": "V1Service", "Job": "V1Job"}


def manifest(n: int, name: str, *program: str, options: tuple[str, ...] = ()) -> list[dict]:
    assert HEDDLE.exists(), f"{HEDDLE} is missing: build it first (make test does)"
    p = subprocess.run(
        [
            HEDDLE,
            "k8s",
            "manifest",
            "-n",
            str(n),
            "--image",
            "heddle:test",
            "--name",
            name,
            *options,
            "--",
            *program,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def test_the_manifest_is_valid_kubernetes():
    docs = manifest(4, "wordcount", "/app/wordcount", "--generate")
    api = ApiClient()
    assert [d["kind"] for d in docs] == ["Secret", "Service", "Job"]
    for doc in docs:
        model = api.deserialize(json.dumps(doc), MODELS[doc["kind"]], "application/json")
        assert api.sanitize_for_serialization(model) == doc, doc["kind"]
    secret, service, job = docs
    assert service["spec"]["clusterIP"] == "None"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 4
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"] == "wordcount"
    container = pod["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["HEDDLE_MASTER"] == "wordcount-0.wordcount:29500"
    assert env["HEDDLE_WORLD_SIZE"] == "4"
    # The token is in the Secret, mounted as a file: never in the environment or args.
    token = secret["stringData"]["token"]
    text = json.dumps([service, job])
    assert token not in text
    mount = container["volumeMounts"][0]["mountPath"]
    assert env["HEDDLE_JOB_TOKEN_FILE"] == f"{mount}/token"
    assert pod["volumes"][0]["secret"]["secretName"] == secret["metadata"]["name"]


def test_requests_are_valid_kubernetes_and_the_workers_offer():
    options = ("--cpus", "500m", "--memory", "1GiB")
    docs = manifest(2, "wc", "/app/wc", options=options)
    api = ApiClient()
    for doc in docs:
        model = api.deserialize(json.dumps(doc), MODELS[doc["kind"]], "application/json")
        assert api.sanitize_for_serialization(model) == doc, doc["kind"]
    container = docs[2]["spec"]["template"]["spec"]["containers"][0]
    gib = str(1 << 30)
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": gib},
        "limits": {"memory": gib},
    }
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["HEDDLE_CPUS_PER_WORKER"] == "0.5"
    assert env["HEDDLE_MEMORY_PER_WORKER"] == gib


def test_bad_names_are_refused():
    p = subprocess.run(
        [HEDDLE, "k8s", "manifest", "-n", "2", "--image", "x", "--name", "Bad_Name", "--", "p"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert p.returncode == 2 and "DNS label" in p.stderr, p.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_pods_run_as_local_processes():
    n = 3
    secret, _, job = manifest(n, "emul", str(COLLECTIVES))
    container = job["spec"]["template"]["spec"]["containers"][0]
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        token_file = Path(tmp) / "token"
        token_file.write_text(secret["stringData"]["token"])
        os.chmod(token_file, 0o400)
        pods = []
        for index in range(n):
            env = job_env({e["name"]: e["value"] for e in container["env"]})
            env.update(
                {
                    "JOB_COMPLETION_INDEX": str(index),
                    # The pod's DNS name and its listening address, on this host instead.
                    "HEDDLE_MASTER": f"127.0.0.1:{port}",
                    "HEDDLE_MASTER_LISTEN": f"127.0.0.1:{port}",
                    "HEDDLE_JOB_TOKEN_FILE": str(token_file),
                    # Every pod is a host of its own.
                    "HEDDLE_HOST_ID": f"emul-{index}",
                }
            )
            pods.append(
                subprocess.Popen(
                    container["command"],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        outs = [p.communicate(timeout=120) for p in pods]
        for p, (_out, err) in zip(pods, outs, strict=True):
            assert p.returncode == 0, err
        summary = json.loads(outs[0][0].strip().splitlines()[-1])
        assert summary["ok"] is True and summary["ranks"] == n
        assert summary["tcp_peers"] == n - 1  # separate "hosts": TCP between pods
