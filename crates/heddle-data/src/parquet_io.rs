//! Parquet files as sources and sinks: the row groups of all input files are dealt to the
//! partitions; rows become records and records rows through serde (`serde_arrow`), one
//! column per struct field, with the schema traced from the record type.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::{FieldRef, Schema, SchemaRef};
use heddle_task::{Edge, Record};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaDataReader;
use parquet::file::properties::WriterProperties;
use serde::de::DeserializeOwned;
use serde_arrow::schema::{SchemaLike, TracingOptions};
use serde_arrow::utils::Item;
use serde_arrow::ArrayBuilder;

use crate::dataset::DataSet;
use crate::input_files::list_files;
use crate::output::{Commit, Output};
use crate::session::Session;
use crate::sources::from_iter_fn;
use crate::tasks::SinkTask;
use crate::Locked;
use crate::{Error, Result};

/// Rows per record batch, read or written.
const BATCH_ROWS: usize = 8192;

fn io(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
    }
}

/// How records map to Arrow types: plain (not large) strings, lists and binaries, maps as
/// Arrow maps, enums without data as strings — what Parquet and other tools handle best.
fn tracing_options() -> TracingOptions {
    TracingOptions::default()
        .allow_null_fields(true)
        .map_as_struct(false)
        .sequence_as_large_list(false)
        .strings_as_large_utf8(false)
        .bytes_as_large_binary(false)
        .enums_without_data_as_strings(true)
}

/// How records of a type lie in columns.
struct Layout {
    /// The Arrow fields (the Parquet columns), traced from the type.
    fields: Vec<FieldRef>,
    /// Whether a record is one column named `item` (it is not a struct).
    item: bool,
}

/// The layout of records of type `T`: a struct's (or tuple's) fields as columns, or any
/// other type as one column named `item`.
///
/// # Errors
/// A type whose layout cannot be traced from the type alone: one holding values whose
/// form only the data shows (`serde_json::Value`, untagged enums ...).
fn layout_of<T: Record>() -> Result<Layout> {
    match Vec::<FieldRef>::from_type::<T>(tracing_options()) {
        Ok(fields) => Ok(Layout { fields, item: false }),
        Err(e) => match Vec::<FieldRef>::from_type::<Item<T>>(tracing_options()) {
            Ok(fields) => Ok(Layout { fields, item: true }),
            _ => Err(Error::InvalidArgument(format!(
                "records of type {} have no Parquet schema: {e}",
                std::any::type_name::<T>()
            ))),
        },
    }
}

/// The records of `batch`.
fn deserialize<T: DeserializeOwned>(
    batch: &RecordBatch,
    item: bool,
) -> serde_arrow::Result<Vec<T>> {
    if item {
        Ok(serde_arrow::from_record_batch::<Vec<Item<T>>>(batch)?
            .into_iter()
            .map(|i| i.0)
            .collect())
    } else {
        serde_arrow::from_record_batch::<Vec<T>>(batch)
    }
}

/// An input file and its footer.
struct ParquetFile {
    path: PathBuf,
    meta: ArrowReaderMetadata,
    /// The top-level columns the records read (`None`: all of them).
    projection: Option<ProjectionMask>,
    /// The row number (from 0) of each row group's first row.
    group_starts: Vec<u64>,
}

impl ParquetFile {
    /// Reads the footer of `path`; `columns` are the names of the fields records have.
    fn open(path: &Path, columns: Option<&[String]>) -> Result<ParquetFile> {
        let f = File::open(path)
            .map_err(|e| Error::Io { path: path.display().to_string(), source: e })?;
        let metadata = ParquetMetaDataReader::new()
            .parse_and_finish(&f)
            .map_err(|e| io(path, format_args!("not a Parquet file ({e})")))?;
        let meta = ArrowReaderMetadata::try_new(Arc::new(metadata), ArrowReaderOptions::new())
            .map_err(|e| io(path, format_args!("a Parquet schema with no Arrow form ({e})")))?;
        let md = meta.metadata();
        let mut group_starts = Vec::with_capacity(md.num_row_groups());
        let mut at = 0u64;
        for g in md.row_groups() {
            group_starts.push(at);
            at += u64::try_from(g.num_rows()).unwrap_or(0);
        }
        let projection = columns.and_then(|names| {
            let roots = md.file_metadata().schema_descr().root_schema().get_fields();
            let keep: Vec<usize> = roots
                .iter()
                .enumerate()
                .filter(|(_, c)| names.iter().any(|n| n == c.name()))
                .map(|(i, _)| i)
                .collect();
            // With no column of the records in the file, read everything: the rows then
            // fail to deserialize with an error naming a missing field.
            (!keep.is_empty() && keep.len() < roots.len())
                .then(|| ProjectionMask::roots(md.file_metadata().schema_descr(), keep))
        });
        Ok(ParquetFile { path: path.to_path_buf(), meta, projection, group_starts })
    }

    /// Whether the file has a top-level column of each of `names`.
    fn check_columns(&self, names: &[String]) -> Result<()> {
        let schema = self.meta.metadata().file_metadata().schema_descr();
        let have: Vec<&str> = schema.root_schema().get_fields().iter().map(|c| c.name()).collect();
        match names.iter().find(|n| !have.contains(&n.as_str())) {
            Some(missing) => Err(Error::InvalidArgument(format!(
                "{} has no column '{missing}'; its columns are {}",
                self.path.display(),
                have.join(", ")
            ))),
            None => Ok(()),
        }
    }
}

impl Session {
    /// Rows of Parquet files — a file, a directory's files (but those whose names start
    /// with `.` or `_`, like `_SUCCESS`), or a glob's matches as [`Session::text_file`]
    /// finds them — deserialized into `T`: a struct reads the columns named as its fields
    /// (a column it lacks is ignored, an `Option` field whose column is missing is
    /// `None`), a tuple the columns `0`, `1` ..., any other type the column `item`. The row
    /// groups of all files, in file order, are dealt to the partitions: partition `i` of
    /// `p` reads row groups `i`, `i + p`, `i + 2p` ...
    ///
    /// The files' footers are read now, on every worker; the rows when an action runs.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-rparquet-{}", std::process::id()));
    /// s.from_vec(vec![(1u32, "a".to_string()), (2, "b".to_string())]).write_parquet(&dir)?;
    /// let rows = s.read_parquet::<(u32, String)>(&dir)?; // columns "0" and "1"
    /// assert_eq!(rows.collect()?, Some(vec![(1, "a".to_string()), (2, "b".to_string())]));
    /// let firsts = s.read_parquet::<(u32,)>(&dir)?; // only column "0" is read
    /// assert_eq!(firsts.map(|r| r.0).collect()?, Some(vec![1, 2]));
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A path that names no readable file; a file that is not Parquet, or whose schema
    /// has no Arrow form (both naming the file). Running: a row that does not fit `T`
    /// ([`Error::Parse`] naming the file, the row counting from 1 as its line, and its row
    /// group).
    pub fn read_parquet<T: Record + DeserializeOwned>(
        &self,
        path: impl AsRef<Path>,
    ) -> Result<DataSet<T>> {
        let layout = layout_of::<T>().ok();
        let columns: Option<Vec<String>> =
            layout.as_ref().map(|l| l.fields.iter().map(|f| f.name().clone()).collect());
        let item = layout.is_some_and(|l| l.item);
        self.parquet_rows(path.as_ref(), columns.as_deref(), item, false)
    }

    /// Rows of Parquet files as [`Session::read_parquet`] reads them, but of the named
    /// `columns` only (`None`: every column), each row deserialized into `T` as a map of
    /// those columns — for records whose form only the data shows (a type that
    /// deserializes any value, such as `serde_json::Value`), whose columns cannot be
    /// traced from the type. Such a type cannot cross workers (their encoding does not
    /// describe itself): map the rows to records first, as record-wise steps chain in
    /// memory.
    ///
    /// ```
    /// use serde_json::Value;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-pqcols-{}", std::process::id()));
    /// s.from_vec(vec![(1u32, "a".to_string()), (2, "b".to_string())]).write_parquet(&dir)?;
    /// let rows = s.read_parquet_columns::<Value>(&dir, Some(&["1".into()]))?;
    /// let rows = rows.map(|row: Value| row.to_string());
    /// assert_eq!(rows.collect()?.unwrap(), [r#"{"1":"a"}"#, r#"{"1":"b"}"#]);
    /// assert!(s.read_parquet_columns::<Value>(&dir, Some(&["2".into()])).is_err());
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Session::read_parquet`]; a file that lacks one of `columns`
    /// ([`Error::InvalidArgument`] naming the file and the columns it has).
    pub fn read_parquet_columns<T: Record + DeserializeOwned>(
        &self,
        path: impl AsRef<Path>,
        columns: Option<&[String]>,
    ) -> Result<DataSet<T>> {
        self.parquet_rows(path.as_ref(), columns, false, true)
    }

    /// The rows of the Parquet files `path` names: of `columns` (with `strict`, every one
    /// of them must be in every file), records being the column `item` if `item`.
    fn parquet_rows<T: Record + DeserializeOwned>(
        &self,
        path: &Path,
        columns: Option<&[String]>,
        item: bool,
        strict: bool,
    ) -> Result<DataSet<T>> {
        let mut listed = list_files(path)?;
        if path.is_dir() {
            listed.retain(|(f, _)| {
                !f.file_name().is_some_and(|n| n.to_string_lossy().starts_with('_'))
            });
            if listed.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "{} holds no Parquet file",
                    path.display()
                )));
            }
        }
        let files = listed
            .iter()
            .map(|(f, _)| ParquetFile::open(f, columns))
            .collect::<Result<Vec<_>>>()?;
        if strict {
            for pf in &files {
                pf.check_columns(columns.unwrap_or_default())?;
            }
        }
        let files = Arc::new(files);
        Ok(from_iter_fn(
            self,
            "read_parquet",
            Arc::new(move |i, p| Box::new(Rows::<T>::new(files.clone(), item, i, p))),
        ))
    }
}

/// The row group being read.
struct Reading {
    file: usize,
    group: usize,
    reader: ParquetRecordBatchReader,
    /// The row number (from 0, in the file) of the next batch's first row.
    next_row: u64,
}

/// The records of partition `i` of `p`: row groups `i, i + p, ...` of the files in order.
struct Rows<T> {
    files: Arc<Vec<ParquetFile>>,
    /// Whether records are the column `item`.
    item: bool,
    /// (file, row group) still to read.
    todo: VecDeque<(usize, usize)>,
    current: Option<Reading>,
    ready: std::vec::IntoIter<T>,
}

impl<T: DeserializeOwned> Rows<T> {
    fn new(files: Arc<Vec<ParquetFile>>, item: bool, i: u32, p: u32) -> Rows<T> {
        let all = files
            .iter()
            .enumerate()
            .flat_map(|(f, pf)| (0..pf.group_starts.len()).map(move |g| (f, g)));
        let todo = all.skip(i as usize).step_by(p.max(1) as usize).collect();
        Rows { files, item, todo, current: None, ready: Vec::new().into_iter() }
    }

    fn open(&self, file: usize, group: usize) -> Result<Reading> {
        let pf = &self.files[file];
        let f = File::open(&pf.path)
            .map_err(|e| Error::Io { path: pf.path.display().to_string(), source: e })?;
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(f, pf.meta.clone())
            .with_row_groups(vec![group])
            .with_batch_size(BATCH_ROWS);
        if let Some(mask) = &pf.projection {
            builder = builder.with_projection(mask.clone());
        }
        let reader =
            builder.build().map_err(|e| io(&pf.path, format_args!("row group {group}: {e}")))?;
        Ok(Reading { file, group, reader, next_row: pf.group_starts[group] })
    }

    /// The records of `batch`, or an error naming the first row that does not fit `T`.
    fn records(&self, batch: &RecordBatch, at: &Reading) -> Result<Vec<T>> {
        deserialize::<T>(batch, self.item).map_err(|whole| {
            // Find the row (only on the error path).
            let bad = (0..batch.num_rows()).find_map(|r| {
                deserialize::<T>(&batch.slice(r, 1), self.item).err().map(|e| (r, e))
            });
            let (row, e) = bad.unwrap_or((0, whole));
            Error::Parse {
                path: self.files[at.file].path.display().to_string(),
                line: at.next_row + row as u64 + 1,
                message: format!("row group {}: {e}", at.group),
            }
        })
    }

    fn step(&mut self) -> Option<Result<T>> {
        loop {
            if let Some(x) = self.ready.next() {
                return Some(Ok(x));
            }
            let Some(at) = self.current.as_mut() else {
                let (file, group) = self.todo.pop_front()?;
                match self.open(file, group) {
                    Ok(r) => self.current = Some(r),
                    Err(e) => return Some(Err(e)),
                }
                continue;
            };
            let batch = match at.reader.next() {
                None => {
                    self.current = None;
                    continue;
                }
                Some(Err(e)) => {
                    return Some(Err(io(
                        &self.files[at.file].path,
                        format_args!("row group {}: {e}", at.group),
                    )))
                }
                Some(Ok(b)) => b,
            };
            let at = self.current.as_ref().expect("reading");
            let records = match self.records(&batch, at) {
                Ok(v) => v,
                Err(e) => return Some(Err(e)),
            };
            self.current.as_mut().expect("reading").next_row += batch.num_rows() as u64;
            self.ready = records.into_iter();
        }
    }
}

impl<T: DeserializeOwned> Iterator for Rows<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        let r = self.step();
        if matches!(r, Some(Err(_))) {
            // Nothing after an error.
            self.todo.clear();
            self.current = None;
        }
        r
    }
}

/// One partition's part file being written.
struct Part {
    path: PathBuf,
    writer: ArrowWriter<BufWriter<File>>,
    rows: ArrayBuilder,
    buffered: usize,
}

impl Part {
    fn create(path: PathBuf, schema: &SchemaRef, fields: &[FieldRef]) -> Result<Part> {
        let file = crate::output::create_part(&path)?;
        let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
        let writer = ArrowWriter::try_new(
            BufWriter::with_capacity(1 << 20, file),
            schema.clone(),
            Some(props),
        )
        .map_err(|e| io(&path, e))?;
        let rows = ArrayBuilder::from_arrow(fields).map_err(|e| io(&path, e))?;
        Ok(Part { path, writer, rows, buffered: 0 })
    }

    fn flush(&mut self) -> Result<()> {
        if self.buffered > 0 {
            let batch = self.rows.to_record_batch().map_err(|e| io(&self.path, e))?;
            self.writer.write(&batch).map_err(|e| io(&self.path, e))?;
            self.buffered = 0;
        }
        Ok(())
    }
}

impl<T: Record> DataSet<T> {
    /// Writes partition `i` into `part-{i:05}.parquet` (Snappy-compressed) of a directory
    /// (a path, or an [`Output`] with a [`crate::WriteMode`], committed as
    /// [`DataSet::write_text`] commits), where the partition is: one row per record, one
    /// column per field of `T` (a struct; `0`, `1` ... for a tuple; one column `item` for
    /// any other type). The schema is traced from the type, so every part file has the
    /// same one, empty partitions included; strings, lists and binaries are written as
    /// Arrow's plain (not large) types, maps as maps, enums without data as strings.
    /// Returns when every worker has written its parts (collective).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-wparquet-{}", std::process::id()));
    /// s.range(0, 100).map(|x| (x, x * x)).write_parquet(&dir)?;
    /// assert!(dir.join("part-00000.parquet").exists() && dir.join("_SUCCESS").exists());
    /// assert_eq!(s.read_parquet::<(u64, u64)>(&dir)?.count()?, 100);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A type with no Parquet schema (one holding values whose form only the data shows,
    /// such as `serde_json::Value`); a file that cannot be written; a record that does not
    /// fit the schema; or as any action.
    pub fn write_parquet(&self, out: impl Into<Output>) -> Result<()> {
        let Layout { fields, item } = layout_of::<T>()?;
        let schema: SchemaRef = Arc::new(Schema::new(fields.clone()));
        let comm = self.session.comm();
        let commit = Arc::new(Commit::begin(comm, &out.into())?);
        let c = commit.clone();
        let written: Arc<Mutex<Vec<u32>>> = Arc::default();
        let parts: Arc<Mutex<HashMap<u32, Part>>> = Arc::default();
        let with = {
            let parts = parts.clone();
            Arc::new(move |i: u32, f: &mut dyn FnMut(&mut Part) -> Result<()>| -> Result<()> {
                let mut parts = parts.locked();
                let part = match parts.entry(i) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(v) => {
                        v.insert(Part::create(c.temp_path(i, ".parquet"), &schema, &fields)?)
                    }
                };
                f(part)
            })
        };
        let w = with.clone();
        let each: Arc<dyn Fn(u32, T) -> Result<()> + Send + Sync> = Arc::new(move |i, x| {
            w(i, &mut |part| {
                let pushed = if item { part.rows.push(Item(&x)) } else { part.rows.push(&x) };
                pushed.map_err(|e| {
                    io(&part.path, format_args!("a record that does not fit the schema: {e}"))
                })?;
                part.buffered += 1;
                if part.buffered >= BATCH_ROWS {
                    part.flush()?;
                }
                Ok(())
            })
        });
        let done = written.clone();
        let end: Arc<dyn Fn(u32) -> Result<()> + Send + Sync> = Arc::new(move |i| {
            with(i, &mut Part::flush)?; // an empty partition's file is created here
            let part = parts.locked().remove(&i).expect("created above");
            part.writer.close().map_err(|e| io(&part.path, e))?;
            done.locked().push(i);
            Ok(())
        });
        let ran = self.run_into(Edge::direct(), self.parallelism(), move |_| SinkTask {
            each: each.clone(),
            end: end.clone(),
        });
        let mine = ran.map(|()| std::mem::take(&mut *written.locked()));
        // Return once every worker's parts are in place, so that what follows (reading the
        // directory back, on any worker) sees them all, whole.
        commit.finish(comm, mine, ".parquet")
    }
}
