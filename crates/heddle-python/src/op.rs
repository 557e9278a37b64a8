//! Reduction operators for Python (`heddle.SUM`, `MAX`, `MIN`, `PROD`, `LAND`, `LOR`,
//! `BAND`, `BOR`, `BXOR`) and their typed Rust counterparts.

use heddle_comm::{Element, Op};
use pyo3::prelude::*;

use crate::buffer::Dtype;
use crate::errors::argument;

/// Which reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpCode {
    Sum,
    Prod,
    Max,
    Min,
    Land,
    Lor,
    Band,
    Bor,
    Bxor,
}

impl OpCode {
    const ALL: [OpCode; 9] = [
        OpCode::Sum,
        OpCode::Prod,
        OpCode::Max,
        OpCode::Min,
        OpCode::Land,
        OpCode::Lor,
        OpCode::Band,
        OpCode::Bor,
        OpCode::Bxor,
    ];

    fn name(self) -> &'static str {
        match self {
            OpCode::Sum => "SUM",
            OpCode::Prod => "PROD",
            OpCode::Max => "MAX",
            OpCode::Min => "MIN",
            OpCode::Land => "LAND",
            OpCode::Lor => "LOR",
            OpCode::Band => "BAND",
            OpCode::Bor => "BOR",
            OpCode::Bxor => "BXOR",
        }
    }

    /// Checks the operator applies to `dtype` (before any communication starts).
    pub(crate) fn check(self, dtype: Dtype, what: &str) -> PyResult<()> {
        let bitwise = matches!(self, OpCode::Band | OpCode::Bor | OpCode::Bxor);
        if !dtype.reducible() {
            return Err(argument(format!(
                "{what}: reductions need bool, int8..int64, uint8..uint64, float32 or float64 \
                 elements"
            )));
        }
        if bitwise && dtype.is_float() {
            return Err(argument(format!(
                "{what}: heddle.{} needs integer or bool elements, not floating point",
                self.name()
            )));
        }
        if dtype == Dtype::Bool && matches!(self, OpCode::Sum | OpCode::Prod) {
            return Err(argument(format!(
                "{what}: heddle.{} on bool elements would leave values other than 0 and 1; use \
                 LOR/LAND or an integer dtype",
                self.name()
            )));
        }
        Ok(())
    }
}

/// A reduction operator, applied element by element. Use the module constants
/// (`heddle.SUM`, ...); each is associative and commutative.
#[pyclass(frozen, module = "heddle._heddle.comm", name = "Op")]
#[derive(Debug)]
pub(crate) struct PyOp {
    pub(crate) code: OpCode,
}

#[pymethods]
impl PyOp {
    fn __repr__(&self) -> String {
        format!("heddle.{}", self.code.name())
    }

    /// The operator's name, e.g. ``"SUM"``.
    #[getter]
    fn name(&self) -> &'static str {
        self.code.name()
    }

    /// Pickles by name: the constant of the same name in `heddle._heddle.comm`.
    fn __reduce__(&self) -> &'static str {
        self.code.name()
    }
}

/// Adds the operator constants to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOp>()?;
    for code in OpCode::ALL {
        m.add(code.name(), Py::new(m.py(), PyOp { code })?)?;
    }
    Ok(())
}

/// Element types with the arithmetic the operators need.
pub(crate) trait Num: Element {
    const ZERO: Self;
    const ONE: Self;
    fn band(a: Self, b: Self) -> Self;
    fn bor(a: Self, b: Self) -> Self;
    fn bxor(a: Self, b: Self) -> Self;
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            fn band(a: Self, b: Self) -> Self { a & b }
            fn bor(a: Self, b: Self) -> Self { a | b }
            fn bxor(a: Self, b: Self) -> Self { a ^ b }
        }
    )*};
}
int_num!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            // Rejected by `OpCode::check` before any use.
            fn band(a: Self, _: Self) -> Self { a }
            fn bor(a: Self, _: Self) -> Self { a }
            fn bxor(a: Self, _: Self) -> Self { a }
        }
    )*};
}
float_num!(f32, f64);

fn zip_with<T: Num>(f: fn(T, T) -> T) -> Op<T> {
    Op::custom(move |acc: &mut [T], inc: &[T]| {
        acc.iter_mut().zip(inc).for_each(|(a, b)| *a = f(*a, *b))
    })
}

/// The typed operator for `code` (already checked against the element type).
pub(crate) fn typed<T: Num>(code: OpCode) -> Op<T> {
    let truth = |x: T| x != T::ZERO;
    let bool_of = |b: bool| if b { T::ONE } else { T::ZERO };
    match code {
        OpCode::Sum => Op::Sum,
        OpCode::Prod => Op::Prod,
        OpCode::Max => Op::Max,
        OpCode::Min => Op::Min,
        OpCode::Land => Op::custom(move |acc: &mut [T], inc: &[T]| {
            acc.iter_mut().zip(inc).for_each(|(a, b)| *a = bool_of(truth(*a) && truth(*b)))
        }),
        OpCode::Lor => Op::custom(move |acc: &mut [T], inc: &[T]| {
            acc.iter_mut().zip(inc).for_each(|(a, b)| *a = bool_of(truth(*a) || truth(*b)))
        }),
        OpCode::Band => zip_with(T::band),
        OpCode::Bor => zip_with(T::bor),
        OpCode::Bxor => zip_with(T::bxor),
    }
}

/// Runs `$body` with `$t` bound to the Rust type of the reducible `$dtype` (bool as u8).
macro_rules! with_element {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::buffer::Dtype::I8 => {
                type $t = i8;
                $body
            }
            $crate::buffer::Dtype::U8 | $crate::buffer::Dtype::Bool => {
                type $t = u8;
                $body
            }
            $crate::buffer::Dtype::I16 => {
                type $t = i16;
                $body
            }
            $crate::buffer::Dtype::U16 => {
                type $t = u16;
                $body
            }
            $crate::buffer::Dtype::I32 => {
                type $t = i32;
                $body
            }
            $crate::buffer::Dtype::U32 => {
                type $t = u32;
                $body
            }
            $crate::buffer::Dtype::I64 => {
                type $t = i64;
                $body
            }
            $crate::buffer::Dtype::U64 => {
                type $t = u64;
                $body
            }
            $crate::buffer::Dtype::F32 => {
                type $t = f32;
                $body
            }
            $crate::buffer::Dtype::F64 | $crate::buffer::Dtype::Other => {
                type $t = f64;
                $body
            }
        }
    };
}
pub(crate) use with_element;
