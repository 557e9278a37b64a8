//! Applications from the seeds, as library entry points: [`mds`] (DA-SMACOF
//! multidimensional scaling over row-partitioned dissimilarities).

pub mod mds;
