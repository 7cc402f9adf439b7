//! The errno names a rule may return, both ways: `errno = "EACCES"` in a profile and the name
//! shown by `guard profile show --resolved`.

const TABLE: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EIO", libc::EIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("EACCES", libc::EACCES),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("EXDEV", libc::EXDEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("ETXTBSY", libc::ETXTBSY),
    ("ENOSPC", libc::ENOSPC),
    ("EROFS", libc::EROFS),
    ("EMLINK", libc::EMLINK),
    ("ENAMETOOLONG", libc::ENAMETOOLONG),
    ("ENOSYS", libc::ENOSYS),
    ("ENOTEMPTY", libc::ENOTEMPTY),
    ("ELOOP", libc::ELOOP),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("EAFNOSUPPORT", libc::EAFNOSUPPORT),
    ("EADDRINUSE", libc::EADDRINUSE),
    ("EADDRNOTAVAIL", libc::EADDRNOTAVAIL),
    ("ENETUNREACH", libc::ENETUNREACH),
    ("ECONNREFUSED", libc::ECONNREFUSED),
    ("EHOSTUNREACH", libc::EHOSTUNREACH),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("EDQUOT", libc::EDQUOT),
];

/// The number of an errno name (case-insensitive).
pub fn by_name(name: &str) -> Option<i32> {
    TABLE
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|&(_, v)| v)
}

/// The name of an errno number, if it is one of the known ones.
pub fn name_of(errno: i32) -> Option<&'static str> {
    TABLE.iter().find(|&&(_, v)| v == errno).map(|&(n, _)| n)
}

/// All known names, for hints.
pub fn names() -> String {
    TABLE.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        assert_eq!(by_name("eacces"), Some(libc::EACCES));
        assert_eq!(name_of(libc::EROFS), Some("EROFS"));
        assert_eq!(by_name("EWHATEVER"), None);
    }
}
