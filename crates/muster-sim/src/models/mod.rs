//! Baseline scheduler models.

pub mod cosched;
pub mod kube;
pub mod kueue;
pub mod muster;
