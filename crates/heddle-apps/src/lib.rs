//! Applications from the seeds, as library entry points (`heddle::apps`): [`mds`]
//! (DA-SMACOF multidimensional scaling over row-partitioned dissimilarities) and [`slam`]
//! (Rao-Blackwellized particle-filter SLAM with particles spread over the workers).

pub mod mds;
pub mod slam;
