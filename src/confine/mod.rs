//! confine (in progress)
