//! Applications from the seeds, as library entry points (`heddle::apps`): [`mds`]
//! (DA-SMACOF multidimensional scaling over row-partitioned dissimilarities).

pub mod mds;
