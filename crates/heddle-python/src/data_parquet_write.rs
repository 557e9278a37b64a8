//! One partition of Python records as one Parquet file (`DataSet.write_parquet`): the
//! records are read as values while the GIL is held (`data_parquet_values`); then, without
//! it, each column's Arrow type is inferred as `pyarrow.Table.from_pylist` infers it, the
//! Arrow arrays are built and the `parquet` crate's `ArrowWriter` writes the file.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Float64Array, Int64Array, ListArray,
    NullArray, RecordBatch, StringArray, StructArray, TimestampMicrosecondArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use pyo3::prelude::*;

use crate::data_parquet_values::{self, Value};
use crate::exceptions::DataError;

/// The type of a column, inferred from its values.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// Only nulls so far (Arrow's null type if it stays so).
    Null,
    Bool,
    Int,
    Float,
    Str,
    Bytes,
    /// Timestamps in microseconds, with the time zone's name (`None`: naive).
    Timestamp(Option<Arc<str>>),
    Date,
    List(Box<Kind>),
    Struct(Vec<(String, Kind)>),
}

/// A value whose type does not fit its column: where (the column, and the path inside it
/// of a nested value) and why.
struct Mismatch {
    path: String,
    why: String,
}

impl Kind {
    /// The Python type the column's values have (for error messages).
    fn python_name(&self) -> &'static str {
        match self {
            Kind::Null => "NoneType",
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Str => "str",
            Kind::Bytes => "bytes",
            Kind::Timestamp(_) => "datetime",
            Kind::Date => "date",
            Kind::List(_) => "list",
            Kind::Struct(_) => "dict",
        }
    }

    /// Widens the kind to hold `v` as well (ints and floats make floats; timestamps of
    /// different time zones are kept in UTC), or says why it cannot.
    fn merge(&mut self, v: &Value, path: &str) -> Result<(), Mismatch> {
        let mismatch = |kind: &Kind| Mismatch {
            path: path.to_owned(),
            why: format!(
                "a value of type {} among values of type {} (a Parquet column holds one type)",
                v.type_name(),
                kind.python_name()
            ),
        };
        match (&mut *self, v) {
            (_, Value::Null) => {}
            (Kind::Null, _) => {
                *self = Kind::of(v);
                self.merge(v, path)?;
            }
            (Kind::Bool, Value::Bool(_))
            | (Kind::Int, Value::Int(_))
            | (Kind::Float, Value::Float(_) | Value::Int(_))
            | (Kind::Str, Value::Str(_))
            | (Kind::Bytes, Value::Bytes(_))
            | (Kind::Date, Value::Date(_)) => {}
            (Kind::Int, Value::Float(_)) => *self = Kind::Float,
            (Kind::Timestamp(tz), Value::Timestamp { tz: other, .. }) => match (&*tz, other) {
                (Some(a), Some(b)) if a != b => *tz = Some("UTC".into()),
                (Some(_), None) | (None, Some(_)) => {
                    return Err(Mismatch {
                        path: path.to_owned(),
                        why: "naive and timezone-aware datetimes in one column".to_owned(),
                    })
                }
                _ => {}
            },
            (Kind::List(item), Value::List(items)) => {
                let inner = format!("{path}[]");
                for x in items {
                    item.merge(x, &inner)?;
                }
            }
            (Kind::Struct(fields), Value::Struct(entries)) => {
                for (name, x) in entries {
                    let inner = format!("{path}.{name}");
                    match fields.iter_mut().find(|(n, _)| n == name) {
                        Some((_, kind)) => kind.merge(x, &inner)?,
                        None => {
                            let mut kind = Kind::Null;
                            kind.merge(x, &inner)?;
                            fields.push((name.clone(), kind));
                        }
                    }
                }
            }
            (kind, _) => return Err(mismatch(kind)),
        }
        Ok(())
    }

    /// The kind of `v` alone, before its contents are merged in.
    fn of(v: &Value) -> Kind {
        match v {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Int(_) => Kind::Int,
            Value::Float(_) => Kind::Float,
            Value::Str(_) => Kind::Str,
            Value::Bytes(_) => Kind::Bytes,
            Value::Timestamp { tz, .. } => Kind::Timestamp(tz.clone()),
            Value::Date(_) => Kind::Date,
            Value::List(_) => Kind::List(Box::new(Kind::Null)),
            Value::Struct(_) => Kind::Struct(Vec::new()),
        }
    }
}

/// The value every missing field stands for.
static NULL: Value = Value::Null;

/// The Arrow array of `values` (each null or of `kind`, as inferred).
fn array(kind: &Kind, values: &[&Value]) -> Result<ArrayRef, String> {
    macro_rules! primitive {
        ($array:ty, $pattern:pat => $x:expr) => {
            Arc::new(
                values
                    .iter()
                    .map(|v| match v {
                        $pattern => Some($x),
                        _ => None,
                    })
                    .collect::<$array>(),
            ) as ArrayRef
        };
    }
    Ok(match kind {
        Kind::Null => Arc::new(NullArray::new(values.len())),
        Kind::Bool => primitive!(BooleanArray, Value::Bool(b) => *b),
        Kind::Int => primitive!(Int64Array, Value::Int(i) => *i),
        Kind::Float => Arc::new(
            values
                .iter()
                .map(|v| match v {
                    Value::Float(x) => Some(*x),
                    Value::Int(i) => Some(*i as f64),
                    _ => None,
                })
                .collect::<Float64Array>(),
        ),
        Kind::Str => primitive!(StringArray, Value::Str(s) => s.as_str()),
        Kind::Bytes => primitive!(BinaryArray, Value::Bytes(b) => b.as_slice()),
        Kind::Date => primitive!(Date32Array, Value::Date(d) => *d),
        Kind::Timestamp(tz) => Arc::new(
            values
                .iter()
                .map(|v| match v {
                    Value::Timestamp { micros, .. } => Some(*micros),
                    _ => None,
                })
                .collect::<TimestampMicrosecondArray>()
                .with_timezone_opt(tz.clone()),
        ),
        Kind::List(item) => {
            let mut offsets = Vec::with_capacity(values.len() + 1);
            offsets.push(0i32);
            let mut items: Vec<&Value> = Vec::new();
            for v in values {
                if let Value::List(xs) = v {
                    items.extend(xs.iter());
                }
                let end = i32::try_from(items.len())
                    .map_err(|_| "a column of lists holding over 2^31 items".to_owned())?;
                offsets.push(end);
            }
            let child = array(item, &items)?;
            let field = Arc::new(Field::new("item", child.data_type().clone(), true));
            let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
            Arc::new(
                ListArray::try_new(field, offsets, child, nulls(values))
                    .map_err(|e| e.to_string())?,
            )
        }
        Kind::Struct(fields) if fields.is_empty() => {
            return Err("a dict with no keys, and Parquet has no empty structs".to_owned())
        }
        Kind::Struct(fields) => {
            let mut children = Vec::with_capacity(fields.len());
            let mut arrow_fields = Vec::with_capacity(fields.len());
            for (name, kind) in fields {
                let column: Vec<&Value> = values
                    .iter()
                    .map(|v| match v {
                        Value::Struct(entries) => {
                            entries.iter().find(|(n, _)| n == name).map_or(&NULL, |(_, x)| x)
                        }
                        _ => &NULL,
                    })
                    .collect();
                let child = array(kind, &column)?;
                arrow_fields.push(Field::new(name, child.data_type().clone(), true));
                children.push(child);
            }
            Arc::new(
                StructArray::try_new(Fields::from(arrow_fields), children, nulls(values))
                    .map_err(|e| e.to_string())?,
            )
        }
    })
}

/// The validity of `values` (`None` if none is null).
fn nulls(values: &[&Value]) -> Option<NullBuffer> {
    let valid: Vec<bool> = values.iter().map(|v| !matches!(v, Value::Null)).collect();
    valid.contains(&false).then(|| NullBuffer::from(valid))
}

/// The record batch of `columns`, or a `DataError` message (without its prefix).
fn batch(columns: &data_parquet_values::Columns) -> Result<RecordBatch, String> {
    if columns.names.is_empty() {
        return Err("the records are dicts with no keys, so there are no columns".to_owned());
    }
    let mut fields = Vec::with_capacity(columns.names.len());
    let mut arrays = Vec::with_capacity(columns.names.len());
    for (name, values) in columns.names.iter().zip(&columns.values) {
        let mut kind = Kind::Null;
        for (record, v) in values.iter().enumerate() {
            kind.merge(v, name).map_err(|m| {
                format!(
                    "record {record}, column '{}': {}; convert such values (for example \
                     with str) before writing, or write with write_json_lines",
                    m.path, m.why
                )
            })?;
        }
        let refs: Vec<&Value> = values.iter().collect();
        let a = array(&kind, &refs).map_err(|e| format!("column '{name}': {e}"))?;
        fields.push(Field::new(name, a.data_type().clone(), true));
        arrays.push(a);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(|e| e.to_string())
}

/// Writes `batch` to `path` (snappy-compressed, as pyarrow and `heddle-data` do).
fn write_file(path: &Path, batch: &RecordBatch) -> Result<(), String> {
    let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let mut w = ArrowWriter::try_new(BufWriter::new(file), batch.schema(), Some(props))
        .map_err(|e| e.to_string())?;
    w.write(batch).map_err(|e| e.to_string())?;
    w.close().map_err(|e| e.to_string())?;
    Ok(())
}

/// Writes the records of partition ``partition`` (an iterable) as the Parquet file
/// ``path``: dict records as one column per key, other records as one column ``item``;
/// the column types inferred as ``pyarrow.Table.from_pylist`` infers them. Raises
/// ``DataError`` naming the partition, record, column and type of a value that does not
/// fit, before the file is made.
#[pyfunction]
fn write_parquet_part(
    py: Python<'_>,
    records: &Bound<'_, PyAny>,
    path: PathBuf,
    partition: u32,
) -> PyResult<()> {
    let columns = data_parquet_values::columns(records, partition)?;
    py.detach(move || {
        let fail =
            |e: String| DataError::new_err(format!("write_parquet: partition {partition}, {e}"));
        let batch = batch(&columns).map_err(fail)?;
        drop(columns);
        write_file(&path, &batch).map_err(fail)
    })
}

/// Adds the function to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(write_parquet_part, m)?)
}
