//! Parquet sources and sinks on 1-3 workers (threads with in-process transports), checked
//! against files written and read by the `parquet` and `arrow` crates directly.

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow_array::{
    Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Schema};
use common::on_owned_sessions as on_workers;
use heddle_data::Session;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("heddle-parquet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A record with string, integer, float and optional fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Reading {
    station: String,
    seq: i64,
    celsius: f64,
    note: Option<String>,
    count: Option<u32>,
}

fn readings(n: i64) -> Vec<Reading> {
    (0..n)
        .map(|i| Reading {
            station: format!("st-{}", i % 13),
            seq: i * 7 - 1000,
            celsius: i as f64 * 0.25 - 40.0,
            note: (i % 3 == 0).then(|| format!("note {i} ü")),
            count: (i % 5 != 0).then_some(i as u32 * 11),
        })
        .collect()
}

/// The part files of `dir`, by name (a complete output also holds `_SUCCESS`).
fn part_files(dir: &Path) -> Vec<PathBuf> {
    assert!(dir.join(heddle_data::SUCCESS).exists(), "{} has no _SUCCESS marker", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("part-")))
        .collect();
    files.sort();
    files
}

/// Reads a file with the `parquet` crate: its Arrow schema and record batches.
fn read_with_parquet_crate(path: &Path) -> (Arc<Schema>, Vec<RecordBatch>) {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    let schema = reader.schema().clone();
    let batches = reader.build().unwrap().collect::<Result<Vec<_>, _>>().unwrap();
    (schema, batches)
}

/// `Reading`s decoded by hand from batches the `parquet` crate read.
fn decode_readings(batches: &[RecordBatch]) -> Vec<Reading> {
    let mut out = Vec::new();
    for b in batches {
        let col =
            |name: &str| b.column_by_name(name).unwrap_or_else(|| panic!("column {name}")).clone();
        let station = col("station");
        let station = station.as_any().downcast_ref::<StringArray>().expect("station: Utf8");
        let seq = col("seq");
        let seq = seq.as_any().downcast_ref::<Int64Array>().expect("seq: Int64");
        let celsius = col("celsius");
        let celsius = celsius.as_any().downcast_ref::<Float64Array>().expect("celsius: Float64");
        let note = col("note");
        let note = note.as_any().downcast_ref::<StringArray>().expect("note: Utf8");
        let count = col("count");
        let count = count.as_any().downcast_ref::<UInt32Array>().expect("count: UInt32");
        for r in 0..b.num_rows() {
            out.push(Reading {
                station: station.value(r).to_string(),
                seq: seq.value(r),
                celsius: celsius.value(r),
                note: note.is_valid(r).then(|| note.value(r).to_string()),
                count: count.is_valid(r).then(|| count.value(r)),
            });
        }
    }
    out
}

fn sorted(mut v: Vec<Reading>) -> Vec<Reading> {
    v.sort_by_key(|r| r.seq);
    v
}

#[test]
fn written_parts_read_back_equal_the_input_on_1_to_3_workers() {
    let input = readings(5000);
    for n in 1..=3 {
        let dir = temp_dir(&format!("roundtrip-{n}"));
        let out = dir.join("out");
        let got = on_workers(n, |s| {
            s.from_vec(input.clone()).write_parquet(&out).unwrap();
            s.read_parquet::<Reading>(&out).unwrap().collect_all().unwrap()
        });
        for g in got {
            assert_eq!(sorted(g), input, "{n} workers: read back through the data API");
        }
        // The files themselves, read by the parquet crate: one per partition, the records
        // in partition order.
        let files = part_files(&out);
        let names: Vec<String> =
            files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
        let want: Vec<String> = (0..n).map(|i| format!("part-{i:05}.parquet")).collect();
        assert_eq!(names, want);
        let mut all = Vec::new();
        for f in &files {
            all.extend(decode_readings(&read_with_parquet_crate(f).1));
        }
        assert_eq!(
            all, input,
            "{n} workers: from_vec splits in order, so the parts concatenate to the input"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn every_part_has_the_same_schema_even_when_empty() {
    let dir = temp_dir("schema");
    let out = dir.join("out");
    let input = readings(3);
    let got = on_workers(2, |s| {
        let s = s.with_partitions(5).unwrap();
        s.from_vec(input.clone()).write_parquet(&out).unwrap();
        s.read_parquet::<Reading>(&out).unwrap().collect_all().unwrap()
    });
    let files = part_files(&out);
    assert_eq!(files.len(), 5);
    let want = Schema::new(vec![
        Field::new("station", DataType::Utf8, false),
        Field::new("seq", DataType::Int64, false),
        Field::new("celsius", DataType::Float64, false),
        Field::new("note", DataType::Utf8, true),
        Field::new("count", DataType::UInt32, true),
    ]);
    let mut rows = 0;
    for f in &files {
        let (schema, batches) = read_with_parquet_crate(f);
        let fields: Vec<(String, DataType, bool)> = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable()))
            .collect();
        let want: Vec<(String, DataType, bool)> = want
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable()))
            .collect();
        assert_eq!(fields, want, "{}", f.display());
        rows += batches.iter().map(RecordBatch::num_rows).sum::<usize>();
    }
    assert_eq!(rows, 3, "two of the five partitions hold nothing");
    assert_eq!(sorted(got[0].clone()), input);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Rows of a file written by the parquet crate (ids from `first`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Trip {
    id: i64,
    city: String,
    fare: Option<f64>,
}

fn trip(id: i64) -> Trip {
    Trip { id, city: format!("c{}", id % 17), fare: (id % 4 != 0).then_some(id as f64 / 8.0) }
}

/// Writes trips `ids` with the parquet crate, `group_rows` rows per row group, with an
/// extra Int32 column `unused` the records do not have.
fn write_trips(path: &Path, ids: std::ops::Range<i64>, group_rows: usize) {
    write_trips_compressed(path, ids, group_rows, Compression::UNCOMPRESSED);
}

fn write_trips_compressed(
    path: &Path,
    ids: std::ops::Range<i64>,
    group_rows: usize,
    compression: Compression,
) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("unused", DataType::Int32, false),
        Field::new("id", DataType::Int64, false),
        Field::new("city", DataType::Utf8, false),
        Field::new("fare", DataType::Float64, true),
    ]));
    let trips: Vec<Trip> = ids.map(trip).collect();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group_rows))
        .set_compression(compression)
        .build();
    let mut w =
        ArrowWriter::try_new(File::create(path).unwrap(), schema.clone(), Some(props)).unwrap();
    for chunk in trips.chunks(37) {
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int32Array::from(vec![-1; chunk.len()])),
                Arc::new(Int64Array::from(chunk.iter().map(|t| t.id).collect::<Vec<_>>())),
                Arc::new(StringArray::from(
                    chunk.iter().map(|t| t.city.clone()).collect::<Vec<_>>(),
                )),
                Arc::new(Float64Array::from(chunk.iter().map(|t| t.fare).collect::<Vec<_>>())),
            ],
        )
        .unwrap();
        w.write(&batch).unwrap();
    }
    w.close().unwrap();
}

/// Every partition's records, by partition, from every worker.
fn by_partition<T: serde::Serialize + serde::de::DeserializeOwned + Clone + Send + 'static>(
    n: usize,
    partitions: u32,
    read: impl Fn(&Session) -> heddle_data::DataSet<T> + Sync,
) -> BTreeMap<u32, Vec<T>> {
    let seen: Arc<Mutex<BTreeMap<u32, Vec<T>>>> = Arc::default();
    on_workers(n, |s| {
        let s = s.with_partitions(partitions).unwrap();
        let seen = seen.clone();
        read(&s)
            .for_each(move |i, x| {
                seen.lock().unwrap().entry(i).or_default().push(x);
                Ok(())
            })
            .unwrap();
    });
    let seen = seen.lock().unwrap().clone();
    seen
}

#[test]
fn row_groups_of_a_parquet_crate_file_are_dealt_to_the_partitions() {
    let dir = temp_dir("dealt");
    let path = dir.join("trips.parquet");
    write_trips(&path, 0..1050, 100); // 11 row groups, the last of 50 rows
    let groups = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
        .unwrap()
        .metadata()
        .num_row_groups();
    assert_eq!(groups, 11);
    for (n, p) in [(1, 1), (2, 2), (3, 3), (2, 4), (3, 13)] {
        let got = by_partition(n, p, |s| s.read_parquet::<Trip>(&path).unwrap());
        for i in 0..p {
            let want: Vec<Trip> = (i as i64..11)
                .step_by(p as usize)
                .flat_map(|g| g * 100..((g + 1) * 100).min(1050))
                .map(trip)
                .collect();
            assert_eq!(
                got.get(&i).cloned().unwrap_or_default(),
                want,
                "{n} workers, {p} partitions: partition {i}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_glob_reads_every_matching_file_once_and_a_directory_skips_marker_files() {
    let dir = temp_dir("glob");
    // Three files of 3, 1 and 2 row groups (uncompressed, Zstandard, Snappy), and files
    // the glob does not name.
    write_trips(&dir.join("trips-a.parquet"), 0..250, 100);
    write_trips_compressed(
        &dir.join("trips-b.parquet"),
        250..300,
        100,
        Compression::ZSTD(ZstdLevel::default()),
    );
    write_trips_compressed(&dir.join("trips-c.parquet"), 300..480, 90, Compression::SNAPPY);
    write_trips(&dir.join("other.parquet"), 10_000..10_010, 100);
    std::fs::write(dir.join("notes.txt"), "not parquet\n").unwrap();
    let want: Vec<Trip> = (0..480).map(trip).collect();
    for n in 1..=3 {
        let got = by_partition(n, n as u32 + 1, |s| {
            s.read_parquet::<Trip>(dir.join("trips-*.parquet")).unwrap()
        });
        let mut all: Vec<Trip> = got.into_values().flatten().collect();
        all.sort_by_key(|t| t.id);
        assert_eq!(all, want, "{n} workers");
    }
    // A directory of part files with a `_SUCCESS` marker: the marker is no input.
    let parts = dir.join("parts");
    std::fs::create_dir_all(&parts).unwrap();
    write_trips(&parts.join("part-00000.parquet"), 0..120, 50);
    write_trips(&parts.join("part-00001.parquet"), 120..200, 50);
    std::fs::write(parts.join("_SUCCESS"), "").unwrap();
    let got = on_workers(2, |s| s.read_parquet::<Trip>(&parts).unwrap().count().unwrap());
    assert_eq!(got, vec![200, 200]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_that_is_not_parquet_is_an_error_naming_it() {
    let dir = temp_dir("notparquet");
    write_trips(&dir.join("a.parquet"), 0..10, 100);
    std::fs::write(dir.join("b.parquet"), "id,city\n1,x\n".repeat(10)).unwrap();
    std::fs::write(dir.join("c.parquet"), "PAR1").unwrap();
    let errs = on_workers(1, |s| {
        let whole = s.read_parquet::<Trip>(&dir).unwrap_err().to_string();
        let short = s.read_parquet::<Trip>(dir.join("c.parquet")).unwrap_err().to_string();
        let missing = s.read_parquet::<Trip>(dir.join("none-*.parquet")).unwrap_err().to_string();
        (whole, short, missing)
    })
    .remove(0);
    assert!(errs.0.contains("b.parquet") && errs.0.contains("not a Parquet file"), "{}", errs.0);
    assert!(errs.1.contains("c.parquet") && errs.1.contains("not a Parquet file"), "{}", errs.1);
    assert!(errs.2.contains("names no readable file"), "{}", errs.2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_row_that_does_not_fit_is_a_parse_error_naming_file_and_row_group() {
    let dir = temp_dir("misfit");
    let path = dir.join("people.parquet");
    // Row 251 (row group 2 of groups of 100) has no name, which `Person` requires.
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, true),
        Field::new("age", DataType::Int64, false),
    ]));
    let names: Vec<Option<String>> =
        (0..300).map(|i| (i != 250).then(|| format!("p{i}"))).collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(Int64Array::from((0..300).collect::<Vec<i64>>())),
        ],
    )
    .unwrap();
    let props = WriterProperties::builder().set_max_row_group_row_count(Some(100)).build();
    let mut w = ArrowWriter::try_new(File::create(&path).unwrap(), schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();

    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct Person {
        name: String,
        age: i64,
    }
    #[derive(Debug, Clone, Serialize, Deserialize)]
    struct Aged {
        age: String,
    }
    let (missing, mistyped, fine) = on_workers(1, |s| {
        let missing = s.read_parquet::<Person>(&path).unwrap().count().unwrap_err().to_string();
        let mistyped = s.read_parquet::<Aged>(&path).unwrap().count().unwrap_err().to_string();
        #[derive(Debug, Clone, Serialize, Deserialize)]
        struct Lenient {
            name: Option<String>,
            age: i64,
        }
        let fine = s.read_parquet::<Lenient>(&path).unwrap().collect_all().unwrap();
        (
            missing,
            mistyped,
            fine.iter().filter(|p| p.name.is_none()).map(|p| p.age).collect::<Vec<_>>(),
        )
    })
    .remove(0);
    assert!(missing.contains("people.parquet line 251: row group 2"), "{missing}");
    assert!(mistyped.contains("people.parquet line 1: row group 0"), "{mistyped}");
    assert_eq!(fine, vec![250]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Kind {
    Small,
    Large,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Point {
    x: i32,
    label: Option<String>,
}

/// Most of what records hold: booleans, small integers, chars, bytes, lists, nested and
/// optional structs, enums without data, maps and tuples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Wide {
    flag: bool,
    small: u8,
    signed: i16,
    letter: char,
    bytes: Vec<u8>,
    list: Vec<i32>,
    at: Point,
    maybe_at: Option<Point>,
    kind: Kind,
    tags: BTreeMap<String, i64>,
    pair: (i32, String),
}

fn wide(i: i32) -> Wide {
    Wide {
        flag: i % 2 == 0,
        small: (i % 256) as u8,
        signed: -(i as i16),
        letter: char::from(b'a' + (i % 26) as u8),
        bytes: vec![i as u8; (i % 4) as usize],
        list: (0..i % 5).collect(),
        at: Point { x: i, label: (i % 3 == 0).then(|| format!("p{i}")) },
        maybe_at: (i % 2 == 1).then(|| Point { x: -i, label: None }),
        kind: if i % 7 == 0 { Kind::Large } else { Kind::Small },
        tags: (0..i % 3).map(|k| (format!("t{k}"), i64::from(k * i))).collect(),
        pair: (i, format!("s{i}")),
    }
}

#[test]
fn nested_types_tuples_and_plain_values_round_trip() {
    let dir = temp_dir("types");
    let wides: Vec<Wide> = (0..500).map(wide).collect();
    let pairs: Vec<(String, u64)> = (0..300).map(|i| (format!("w{i}"), i * i)).collect();
    let lines: Vec<String> = (0..200).map(|i| format!("line {i}")).collect();
    let got = on_workers(2, |s| {
        s.from_vec(wides.clone()).write_parquet(dir.join("wide")).unwrap();
        s.from_vec(pairs.clone()).write_parquet(dir.join("pairs")).unwrap();
        s.from_vec(lines.clone()).write_parquet(dir.join("lines")).unwrap();
        let untraceable = s
            .from_vec(vec![serde_json::json!({"a": 1})])
            .write_parquet(dir.join("json"))
            .unwrap_err()
            .to_string();
        (
            s.read_parquet::<Wide>(dir.join("wide")).unwrap().collect_all().unwrap(),
            s.read_parquet::<(String, u64)>(dir.join("pairs")).unwrap().collect_all().unwrap(),
            s.read_parquet::<String>(dir.join("lines")).unwrap().collect_all().unwrap(),
            untraceable,
        )
    });
    for (mut w, mut p, mut l, untraceable) in got {
        w.sort_by_key(|x| x.at.x);
        p.sort_by_key(|x| x.1);
        l.sort_by_key(|x| x[5..].parse::<u32>().unwrap());
        assert_eq!((w, p, l), (wides.clone(), pairs.clone(), lines.clone()));
        assert!(untraceable.contains("no Parquet schema"), "{untraceable}");
    }
    // The columns as other readers see them.
    let columns = |sub: &str| -> Vec<(String, DataType)> {
        let (schema, _) = read_with_parquet_crate(&dir.join(sub).join("part-00000.parquet"));
        schema.fields().iter().map(|f| (f.name().clone(), f.data_type().clone())).collect()
    };
    assert_eq!(
        columns("pairs"),
        vec![("0".to_string(), DataType::Utf8), ("1".to_string(), DataType::UInt64)]
    );
    assert_eq!(columns("lines"), vec![("item".to_string(), DataType::Utf8)]);
    let wide_columns = columns("wide");
    assert_eq!(
        wide_columns.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        [
            "flag", "small", "signed", "letter", "bytes", "list", "at", "maybe_at", "kind", "tags",
            "pair"
        ]
    );
    assert_eq!(wide_columns[3].1, DataType::UInt32, "a char is its code point");
    assert!(
        matches!(&wide_columns[8].1, DataType::Dictionary(_, v) if **v == DataType::Utf8),
        "an enum without data is a string: {:?}",
        wide_columns[8].1
    );
    assert!(matches!(wide_columns[9].1, DataType::Map(..)), "{:?}", wide_columns[9].1);
    std::fs::remove_dir_all(&dir).unwrap();
}
