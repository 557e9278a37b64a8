//! Unit tests of the state backend's files.

use super::*;

fn store(name: &str) -> Store {
    let dir = std::env::temp_dir().join(format!("heddle-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Store::open(&dir, "job", "graph", "stream").expect("a store")
}

#[test]
fn pruning_removes_old_states_and_a_killed_writers_temporary_files() {
    let s = store("prune");
    for id in [1, 2] {
        s.write_state(id, 3, Some(b"state"), None).unwrap();
    }
    s.write_state(1, 4, Some(b"another worker's"), None).unwrap();
    let temp = s.dir().join(".stream-000000000001.task-3.state.999.tmp");
    std::fs::write(&temp, b"half").unwrap();
    s.prune(&[3], &|id| id < 2, None);
    assert!(!temp.exists() && !s.state_path(1, 3).exists());
    assert!(s.state_path(2, 3).exists() && s.state_path(1, 4).exists());
    assert_eq!(s.read_state(2, 3).unwrap(), (Some(b"state".to_vec()), None));
    std::fs::remove_dir_all(s.dir()).unwrap();
}

#[test]
fn records_in_flight_are_kept_beside_the_state_and_checked() {
    let s = store("inflight");
    s.write_state(1, 3, Some(b"state"), Some(b"records")).unwrap();
    s.write_state(1, 4, None, Some(b"only records")).unwrap();
    s.write_state(1, 5, Some(b""), None).unwrap();
    assert_eq!(s.read_state(1, 3).unwrap(), (Some(b"state".to_vec()), Some(b"records".to_vec())));
    assert_eq!(s.read_state(1, 4).unwrap(), (None, Some(b"only records".to_vec())));
    assert_eq!(s.read_state(1, 5).unwrap(), (Some(Vec::new()), None));
    // A flipped byte in the records is found.
    let path = s.state_path(1, 3);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    assert!(s.read_state(1, 3).unwrap_err().to_string().contains("checksum"));
    std::fs::remove_dir_all(s.dir()).unwrap();
}

#[test]
fn the_newest_commit_is_found_and_a_damaged_one_refused() {
    let s = store("latest");
    assert_eq!(s.latest().unwrap(), None);
    let commit = |id| Commit {
        job: "job".into(),
        graph: "graph".into(),
        checkpoint: id,
        last: false,
        states: vec![],
        bytes: 0,
        duration_ms: 1.0,
        unaligned_tasks: 0,
    };
    s.commit(&commit(4)).unwrap();
    s.commit(&commit(5)).unwrap();
    assert_eq!(s.latest().unwrap(), Some(commit(5)));
    let mut f = heddle_comm::private::create_file(&s.commit_path(6)).unwrap();
    f.write_all(b"HEDDLE-STREAM-CHECKPOINT 1\n{not json\n").unwrap();
    let e = s.latest().unwrap_err().to_string();
    assert!(e.contains("stream-000000000006.ckpt") && e.contains("damaged"), "{e}");
    std::fs::remove_dir_all(s.dir()).unwrap();
}

#[test]
fn staged_states_appear_only_when_published_and_discarded_ones_leave_nothing() {
    let s = store("staged");
    let a = s.stage_state(7, 1, Some(b"one"), None).unwrap();
    let b = s.stage_state(7, 2, None, Some(b"in flight")).unwrap();
    let c = s.stage_state(8, 1, Some(b"never published"), None).unwrap();
    assert!(!s.state_path(7, 1).exists(), "not before it is published");
    publish(vec![a, b]).unwrap();
    assert_eq!(s.read_state(7, 1).unwrap(), (Some(b"one".to_vec()), None));
    assert_eq!(s.read_state(7, 2).unwrap(), (None, Some(b"in flight".to_vec())));
    c.discard();
    let names: Vec<String> = std::fs::read_dir(s.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "only the published states: {names:?}");
    std::fs::remove_dir_all(s.dir()).unwrap();
}

#[test]
fn the_writer_reports_a_checkpoints_states_once_sealed_and_removes_unsealed_ones() {
    use super::super::writer::Writer;
    let s = store("writer");
    let w = Writer::start(s.clone(), None).unwrap();
    w.write(3, 1, (Some(b"a".to_vec()), None));
    w.write(3, 2, (Some(b"b".to_vec()), Some(b"c".to_vec())));
    w.write(4, 1, (Some(b"aborted".to_vec()), None));
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(w.written().is_empty(), "nothing reported before the seal");
    w.seal(3);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut done = Vec::new();
    while done.len() < 2 && std::time::Instant::now() < deadline {
        done.extend(w.written().into_iter().map(|x| (x.checkpoint, x.task, x.result)));
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    done.sort_by_key(|d| d.1);
    assert_eq!(done, vec![(3, 1, Ok(1)), (3, 2, Ok(2))]);
    assert_eq!(s.read_state(3, 2).unwrap(), (Some(b"b".to_vec()), Some(b"c".to_vec())));
    drop(w); // checkpoint 4 never sealed: its staged file goes
    let left = std::fs::read_dir(s.dir()).unwrap().count();
    assert_eq!(left, 2, "checkpoint 3's two states, nothing of 4");
    std::fs::remove_dir_all(s.dir()).unwrap();
}
