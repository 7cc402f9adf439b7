//! supervisor (in progress)
