//! Typed buffer elements and reduction operators.

use std::fmt;
use std::sync::Arc;

use heddle_wire::Dtype;

/// A primitive type that collectives can move and reduce: plain bytes, fixed size.
pub trait Element: bytemuck::Pod + PartialOrd + Send + Sync + 'static {
    /// Wire dtype of this type.
    const DTYPE: Dtype;
    /// `a + b` (wrapping for integers).
    fn add(a: Self, b: Self) -> Self;
    /// `a * b` (wrapping for integers).
    fn mul(a: Self, b: Self) -> Self;
}

macro_rules! int_element {
    ($($t:ty => $d:ident),*) => {$(
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$d;
            #[inline] fn add(a: Self, b: Self) -> Self { a.wrapping_add(b) }
            #[inline] fn mul(a: Self, b: Self) -> Self { a.wrapping_mul(b) }
        }
    )*};
}
int_element!(u8 => U8, i8 => I8, u16 => U16, i16 => I16);
int_element!(u32 => U32, i32 => I32, u64 => U64, i64 => I64);

macro_rules! float_element {
    ($($t:ty => $d:ident),*) => {$(
        impl Element for $t {
            const DTYPE: Dtype = Dtype::$d;
            #[inline] fn add(a: Self, b: Self) -> Self { a + b }
            #[inline] fn mul(a: Self, b: Self) -> Self { a * b }
        }
    )*};
}
float_element!(f32 => F32, f64 => F64);

/// A user-defined reduction: folds `incoming` into `acc` element by element.
pub type CustomOp<T> = Arc<dyn Fn(&mut [T], &[T]) + Send + Sync>;

/// A reduction operator. Every operator must be associative and commutative: algorithms
/// combine partial results in an order that depends on the world size.
///
/// ```
/// use heddle_comm::Op;
/// let mut acc = [1.0f64, 5.0];
/// Op::Max.apply(&mut acc, &[3.0, 2.0]);
/// assert_eq!(acc, [3.0, 5.0]);
/// let bitor = Op::custom(|a: &mut [u32], b: &[u32]| {
///     a.iter_mut().zip(b).for_each(|(x, y)| *x |= *y)
/// });
/// let mut acc = [1u32];
/// bitor.apply(&mut acc, &[6]);
/// assert_eq!(acc, [7]);
/// ```
#[derive(Clone)]
pub enum Op<T: Element> {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// A user function.
    Custom(CustomOp<T>),
}

impl<T: Element> fmt::Debug for Op<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Sum => "Sum",
            Op::Prod => "Prod",
            Op::Min => "Min",
            Op::Max => "Max",
            Op::Custom(_) => "Custom",
        })
    }
}

impl<T: Element> Op<T> {
    /// Wraps a user function (associative and commutative) as an operator.
    pub fn custom(f: impl Fn(&mut [T], &[T]) + Send + Sync + 'static) -> Op<T> {
        Op::Custom(Arc::new(f))
    }

    /// The reduction's code in a collective's signature: 1 sum, 2 prod, 3 min, 4 max,
    /// 5 custom.
    pub(crate) fn code(&self) -> u8 {
        match self {
            Op::Sum => 1,
            Op::Prod => 2,
            Op::Min => 3,
            Op::Max => 4,
            Op::Custom(_) => 5,
        }
    }

    /// Folds `incoming` into `acc`.
    ///
    /// # Panics
    /// If the slices differ in length.
    pub fn apply(&self, acc: &mut [T], incoming: &[T]) {
        assert_eq!(acc.len(), incoming.len(), "reduction operands differ in length");
        match self {
            Op::Sum => acc.iter_mut().zip(incoming).for_each(|(a, b)| *a = T::add(*a, *b)),
            Op::Prod => acc.iter_mut().zip(incoming).for_each(|(a, b)| *a = T::mul(*a, *b)),
            Op::Min => acc.iter_mut().zip(incoming).for_each(|(a, b)| {
                if *b < *a {
                    *a = *b
                }
            }),
            Op::Max => acc.iter_mut().zip(incoming).for_each(|(a, b)| {
                if *b > *a {
                    *a = *b
                }
            }),
            Op::Custom(f) => f(acc, incoming),
        }
    }

    /// Folds `incoming` bytes into `acc` bytes; both hold whole elements. Handles an
    /// `incoming` slice that is not aligned for `T` by copying it first.
    pub(crate) fn apply_bytes(&self, acc: &mut [u8], incoming: &[u8]) {
        let acc: &mut [T] = bytemuck::cast_slice_mut(acc);
        match bytemuck::try_cast_slice::<u8, T>(incoming) {
            Ok(inc) => self.apply(acc, inc),
            Err(_) => {
                let inc: Vec<T> = incoming
                    .chunks_exact(std::mem::size_of::<T>())
                    .map(bytemuck::pod_read_unaligned)
                    .collect();
                self.apply(acc, &inc)
            }
        }
    }
}
