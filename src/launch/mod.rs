//! launch (in progress)
