//! Applications from the seeds, as library entry points (`heddle::apps`): [`mds`]
//! (DA-SMACOF multidimensional scaling over row-partitioned dissimilarities), [`slam`]
//! (Rao-Blackwellized particle-filter SLAM with particles spread over the workers) and
//! [`ad_benchmark`] (the Yahoo streaming benchmark's pipeline over Redis).

pub mod ad_benchmark;
pub mod mds;
pub mod slam;
