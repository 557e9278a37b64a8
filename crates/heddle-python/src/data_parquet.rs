//! Parquet rows as Python records: read by `heddle_data`'s Parquet source
//! (`Session::read_parquet_columns`), each row as a [`Cell`] — whatever value the column
//! holds, as Arrow's serde form gives it — then made a dict of its columns, or the value
//! itself for a file of one column named `item` (how `write_parquet` stores records that
//! are not dicts).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use heddle_data::Session;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};

use crate::errors;
use crate::failure;
use crate::record::PyObj;

/// One value of a Parquet row.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Cell>),
    /// A struct's fields or a map's entries, in order.
    Map(Vec<(Cell, Cell)>),
}

struct CellVisitor;

impl<'de> Visitor<'de> for CellVisitor {
    type Value = Cell;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Parquet value")
    }
    fn visit_unit<E>(self) -> Result<Cell, E> {
        Ok(Cell::Null)
    }
    fn visit_none<E>(self) -> Result<Cell, E> {
        Ok(Cell::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Cell, D::Error> {
        Cell::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Cell, E> {
        Ok(Cell::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Cell, E> {
        Ok(Cell::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Cell, E> {
        Ok(Cell::UInt(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Cell, E> {
        Ok(Cell::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cell, E> {
        Ok(Cell::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Cell, E> {
        Ok(Cell::Str(v))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<Cell, E> {
        Ok(Cell::Bytes(v.to_vec()))
    }
    fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Cell, E> {
        Ok(Cell::Bytes(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Cell, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(x) = seq.next_element()? {
            items.push(x);
        }
        Ok(Cell::List(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Cell, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Cell::Map(entries))
    }
}

impl<'de> Deserialize<'de> for Cell {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Cell, D::Error> {
        d.deserialize_any(CellVisitor)
    }
}

/// Rows never cross workers as cells: they become Python records where they are read (the
/// map in [`read`] chains to the source in memory), and could not be decoded elsewhere
/// (a cell deserializes any value, which bincode cannot describe). Records of data sets
/// must be serializable all the same.
impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Cell::Null => s.serialize_unit(),
            Cell::Bool(b) => s.serialize_bool(*b),
            Cell::Int(i) => s.serialize_i64(*i),
            Cell::UInt(u) => s.serialize_u64(*u),
            Cell::Float(x) => s.serialize_f64(*x),
            Cell::Str(x) => s.serialize_str(x),
            Cell::Bytes(b) => s.serialize_bytes(b),
            Cell::List(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for x in items {
                    seq.serialize_element(x)?;
                }
                seq.end()
            }
            Cell::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl Cell {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Cell::Null => py.None().into_bound(py),
            Cell::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
            Cell::Int(i) => i.into_pyobject(py)?.into_any(),
            Cell::UInt(u) => u.into_pyobject(py)?.into_any(),
            Cell::Float(x) => x.into_pyobject(py)?.into_any(),
            Cell::Str(x) => x.into_pyobject(py)?.into_any(),
            Cell::Bytes(b) => PyBytes::new(py, b).into_any(),
            Cell::List(items) => {
                PyList::new(py, items.iter().map(|x| x.to_py(py)).collect::<PyResult<Vec<_>>>()?)?
                    .into_any()
            }
            Cell::Map(entries) => {
                let d = PyDict::new(py);
                for (k, v) in entries {
                    d.set_item(k.to_py(py)?, v.to_py(py)?)?;
                }
                d.into_any()
            }
        })
    }
}

/// The Python record of a row: the value of a lone `item` column, else a dict of the
/// columns (in the order of `order` when given).
fn row_to_py<'py>(py: Python<'py>, row: &Cell, order: Option<&[String]>) -> PyResult<PyObj> {
    let Cell::Map(entries) = row else { return Ok(PyObj::new(row.to_py(py)?)) };
    if let [(Cell::Str(name), value)] = entries.as_slice() {
        if name == "item" {
            return Ok(PyObj::new(value.to_py(py)?));
        }
    }
    let d = PyDict::new(py);
    let named = |n: &str| entries.iter().find(|(k, _)| matches!(k, Cell::Str(s) if s == n));
    match order {
        Some(names) => {
            for (k, v) in names.iter().filter_map(|n| named(n)) {
                d.set_item(k.to_py(py)?, v.to_py(py)?)?;
            }
        }
        None => {
            for (k, v) in entries {
                d.set_item(k.to_py(py)?, v.to_py(py)?)?;
            }
        }
    }
    Ok(PyObj::new(d.into_any()))
}

/// The rows of the Parquet files `path` names (of `columns` only, if given) as Python
/// records.
pub(crate) fn read(
    s: &Session,
    path: &Path,
    columns: Option<Vec<String>>,
) -> PyResult<heddle_data::DataSet<PyObj>> {
    let rows = s.read_parquet_columns::<Cell>(path, columns.as_deref()).map_err(errors::data)?;
    let order = Arc::new(columns);
    Ok(rows.map(move |row: Cell| {
        Python::attach(|py| match row_to_py(py, &row, order.as_deref()) {
            Ok(o) => o,
            Err(e) => {
                failure::record(e);
                PyObj::none(py)
            }
        })
    }))
}
