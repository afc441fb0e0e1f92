//! Baseline scheduler models.

pub mod cosched;
pub mod gang;
pub mod kube;
pub mod kueue;
pub mod muster;
pub mod native;
pub mod volcano;
