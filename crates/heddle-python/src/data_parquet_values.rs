//! Python records as Rust values for the Parquet writer (`data_parquet_write`): each record
//! of a partition becomes a row of [`Value`]s, one per column — a dict's keys are the
//! columns (the union of every record's keys, in first-seen order; a missing key is null),
//! any other record is one column named `item` — read while the GIL is held, so that the
//! schema, the Arrow arrays and the file can be made without it.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDate, PyDateAccess, PyDateTime, PyDelta, PyDeltaAccess, PyDict,
    PyFloat, PyInt, PyList, PyString, PyTimeAccess, PyTuple, PyTzInfo, PyTzInfoAccess,
};

use crate::exceptions::DataError;

/// One value of a record, as Parquet will hold it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// `None` (or a key the record lacks).
    Null,
    /// A `bool`.
    Bool(bool),
    /// An `int` within int64.
    Int(i64),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// `bytes` or a `bytearray`.
    Bytes(Vec<u8>),
    /// A `datetime.datetime`: microseconds since 1970-01-01 (UTC for an aware one), and
    /// the name of its time zone (`None`: naive).
    Timestamp { micros: i64, tz: Option<Arc<str>> },
    /// A `datetime.date`: days since 1970-01-01.
    Date(i32),
    /// A `list` or `tuple`.
    List(Vec<Value>),
    /// A `dict` inside a record: its entries in order.
    Struct(Vec<(String, Value)>),
}

impl Value {
    /// The name of the Python type the value came from (for error messages).
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::Timestamp { .. } => "datetime",
            Value::Date(_) => "date",
            Value::List(_) => "list",
            Value::Struct(_) => "dict",
        }
    }
}

/// A partition's records as columns of values.
#[derive(Debug, Default)]
pub(crate) struct Columns {
    /// The column names, in first-seen order.
    pub(crate) names: Vec<String>,
    /// The values of each column (as many as there are records).
    pub(crate) values: Vec<Vec<Value>>,
    /// The number of records.
    pub(crate) rows: usize,
}

/// Where a value being read sits, for error messages.
struct At<'a> {
    partition: u32,
    record: usize,
    /// The column, once known.
    column: Option<&'a str>,
}

impl At<'_> {
    /// A `DataError` about the value here, saying what to do.
    fn err(&self, what: impl std::fmt::Display) -> PyErr {
        let column = self.column.map(|c| format!(", column '{c}'")).unwrap_or_default();
        DataError::new_err(format!(
            "write_parquet: partition {}, record {}{column}: {what}; convert such values \
             (for example with str) before writing, or write with write_json_lines",
            self.partition, self.record
        ))
    }
}

/// Reads Python values, remembering the name of the last time zone seen (most columns of
/// datetimes share one `tzinfo` object).
#[derive(Default)]
struct Reader {
    last_tz: Option<(usize, Arc<str>)>,
}

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The days since 1970-01-01 of a date (or of a datetime's date).
fn epoch_days<T: PyDateAccess>(d: &T) -> i64 {
    days_from_civil(i64::from(d.get_year()), i64::from(d.get_month()), i64::from(d.get_day()))
}

/// A timedelta in microseconds.
fn delta_micros(delta: &Bound<'_, PyDelta>) -> i64 {
    let seconds = i64::from(delta.get_days()) * 86_400 + i64::from(delta.get_seconds());
    seconds * 1_000_000 + i64::from(delta.get_microseconds())
}

/// The time zone name Arrow gets for `tzinfo`, as pyarrow names it: a `zoneinfo` key, a
/// pytz zone, `"UTC"` for an offset of zero, else the offset (`"+02:00"`); and whether
/// every datetime with this `tzinfo` has that name (a key, a zone or a fixed
/// `datetime.timezone`).
fn tz_name(tzinfo: &Bound<'_, PyAny>, offset_micros: i64) -> (Arc<str>, bool) {
    for attribute in ["key", "zone"] {
        if let Ok(name) = tzinfo.getattr(attribute).and_then(|n| n.extract::<String>()) {
            return (name.into(), true);
        }
    }
    // `datetime.timezone.utc`'s type is `datetime.timezone`.
    let fixed = PyTzInfo::utc(tzinfo.py())
        .is_ok_and(|utc| tzinfo.get_type().as_ptr() == utc.get_type().as_ptr());
    if offset_micros == 0 {
        return ("UTC".into(), fixed);
    }
    let minutes = offset_micros.abs() / 60_000_000;
    let sign = if offset_micros < 0 { '-' } else { '+' };
    (format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60).into(), fixed)
}

impl Reader {
    /// The value of the Python object `x`.
    fn value(&mut self, x: &Bound<'_, PyAny>, at: &At<'_>) -> PyResult<Value> {
        if x.is_none() {
            Ok(Value::Null)
        } else if let Ok(b) = x.cast::<PyBool>() {
            Ok(Value::Bool(b.is_true()))
        } else if x.is_instance_of::<PyInt>() {
            x.extract::<i64>().map(Value::Int).map_err(|_| {
                at.err(format_args!("the int {x} does not fit in a Parquet int64 column"))
            })
        } else if let Ok(f) = x.cast::<PyFloat>() {
            Ok(Value::Float(f.value()))
        } else if let Ok(s) = x.cast::<PyString>() {
            Ok(Value::Str(s.to_str()?.to_owned()))
        } else if let Ok(b) = x.cast::<PyBytes>() {
            Ok(Value::Bytes(b.as_bytes().to_vec()))
        } else if let Ok(b) = x.cast::<PyByteArray>() {
            Ok(Value::Bytes(b.to_vec()))
        } else if let Ok(t) = x.cast::<PyDateTime>() {
            self.datetime(t, at)
        } else if let Ok(d) = x.cast::<PyDate>() {
            i32::try_from(epoch_days(d))
                .map(Value::Date)
                .map_err(|_| at.err(format_args!("the date {x} is out of range")))
        } else if let Ok(l) = x.cast::<PyList>() {
            l.iter().map(|v| self.value(&v, at)).collect::<PyResult<_>>().map(Value::List)
        } else if let Ok(t) = x.cast::<PyTuple>() {
            t.iter().map(|v| self.value(&v, at)).collect::<PyResult<_>>().map(Value::List)
        } else if let Ok(d) = x.cast::<PyDict>() {
            let mut entries = Vec::with_capacity(d.len());
            for (k, v) in d.iter() {
                entries.push((field_name(&k, at)?, self.value(&v, at)?));
            }
            Ok(Value::Struct(entries))
        } else if let Ok(i) = x.call_method0("__index__") {
            // Integers of other types (numpy's): as ints.
            self.value(&i, at)
        } else {
            let type_name = x.get_type().name()?;
            Err(at.err(format_args!(
                "a value of type {type_name} has no Parquet type (supported: None, bool, \
                 int, float, str, bytes, datetime, date, and lists and dicts of them)"
            )))
        }
    }

    /// A datetime: microseconds since the epoch, in UTC if it is aware.
    fn datetime(&mut self, t: &Bound<'_, PyDateTime>, at: &At<'_>) -> PyResult<Value> {
        let seconds = i64::from(t.get_hour()) * 3600
            + i64::from(t.get_minute()) * 60
            + i64::from(t.get_second());
        let local = (epoch_days(t) * 86_400 + seconds) * 1_000_000 + i64::from(t.get_microsecond());
        let Some(tzinfo) = t.get_tzinfo() else {
            return Ok(Value::Timestamp { micros: local, tz: None });
        };
        let offset = t.call_method0("utcoffset")?;
        if offset.is_none() {
            return Ok(Value::Timestamp { micros: local, tz: None });
        }
        let offset = delta_micros(offset.cast::<PyDelta>().map_err(|_| {
            at.err(format_args!("the utcoffset() of the datetime {t} is not a timedelta"))
        })?);
        let key = tzinfo.as_ptr() as usize;
        let tz = match &self.last_tz {
            Some((k, name)) if *k == key => name.clone(),
            _ => {
                let (name, stable) = tz_name(tzinfo.as_any(), offset);
                if stable {
                    self.last_tz = Some((key, name.clone()));
                }
                name
            }
        };
        Ok(Value::Timestamp { micros: local - offset, tz: Some(tz) })
    }
}

/// The name of a dict key (column or struct field): it must be a str.
fn field_name(k: &Bound<'_, PyAny>, at: &At<'_>) -> PyResult<String> {
    match k.cast::<PyString>() {
        Ok(s) => Ok(s.to_str()?.to_owned()),
        Err(_) => {
            let type_name = k.get_type().name()?;
            Err(at.err(format_args!(
                "the dict key {k} is of type {type_name}, and Parquet names columns and \
                 fields with str"
            )))
        }
    }
}

/// The records of partition `partition` as columns: dicts if the first record is one
/// (then every record must be), else one column `item`.
///
/// # Errors
/// `DataError` naming the partition, record, column and Python type of a value that has no
/// Parquet form: an object of another type, an int beyond int64, a dict key that is not a
/// str, a record that is not a dict among dicts (or the reverse).
pub(crate) fn columns(records: &Bound<'_, PyAny>, partition: u32) -> PyResult<Columns> {
    let mut reader = Reader::default();
    let mut out = Columns::default();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut dicts = None;
    for (record, x) in records.try_iter()?.enumerate() {
        let x = x?;
        let dict = x.cast::<PyDict>().ok();
        let is_dict = *dicts.get_or_insert(dict.is_some());
        if is_dict != dict.is_some() {
            let at = At { partition, record, column: None };
            let type_name = x.get_type().name()?;
            return Err(at.err(format_args!(
                "a record of type {type_name} among {} (records are written as columns if \
                 the first is a dict, else as one column 'item')",
                if is_dict { "dicts" } else { "records that are not dicts" }
            )));
        }
        match dict {
            None => {
                let at = At { partition, record, column: Some("item") };
                if out.values.is_empty() {
                    out.names.push("item".to_owned());
                    out.values.push(Vec::new());
                }
                let v = reader.value(&x, &at)?;
                out.values[0].push(v);
            }
            Some(d) => {
                for (k, v) in d.iter() {
                    let at = At { partition, record, column: None };
                    let name = field_name(&k, &at)?;
                    let at = At { partition, record, column: Some(&name) };
                    let v = reader.value(&v, &at)?;
                    let i = match index.get(&name) {
                        Some(&i) => i,
                        None => {
                            index.insert(name.clone(), out.names.len());
                            out.names.push(name);
                            out.values.push(vec![Value::Null; out.rows]);
                            out.values.len() - 1
                        }
                    };
                    out.values[i].push(v);
                }
                for column in &mut out.values {
                    if column.len() == out.rows {
                        column.push(Value::Null);
                    }
                }
            }
        }
        out.rows += 1;
    }
    Ok(out)
}
