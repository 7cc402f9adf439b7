//! Appending to a file through a shared mapping of blocks reserved ahead: the journal's log
//! (`journal::log::LogWriter`) copies each entry into memory instead of making a `write(2)`.

use std::fs::File;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::FileExt as _;
use std::ptr::NonNull;

use nix::fcntl::FallocateFlags;
use nix::sys::mman::{MapFlags, ProtFlags};

/// The first window's size: a file appended to a few times (the journal of a command that
/// changes a few files) reserves no more.
pub const FIRST_WINDOW: u64 = 64 << 10;

/// The largest window: each new window is as large as the file (to a power of two), between
/// [`FIRST_WINDOW`] and this, so a growing file is mapped a few times, not once per 64 KiB.
pub const MAX_WINDOW: u64 = 1 << 20;

const PAGE: u64 = 4096;

/// Writes at the end of a file through a window of it mapped `MAP_SHARED`, whose blocks
/// `fallocate` reserved beforehand, so no copy into it can fail for want of space. The file
/// is then longer than what was written, zeros after it, up to the window's end: the owner
/// cuts it to length when it is done (and must make this forget its window before it cuts
/// the file below it: a mapping past a file's end faults). Where a window cannot be reserved
/// or mapped (a filesystem without `fallocate`, a full disk) every write is a `pwrite` from
/// then on, and nothing is left past what was written.
#[derive(Default)]
pub struct Appender {
    window: Option<Window>,
    plain: bool,
}

/// A mapped piece of the file: bytes `start..start + len`.
struct Window {
    at: NonNull<u8>,
    start: u64,
    len: usize,
}

// SAFETY: the window is memory shared with the page cache, reached only through the
// `Appender` that owns it (`&mut` to write): moving it to another thread is sound.
unsafe impl Send for Window {}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: `at` and `len` are those of a mapping made by `Appender::window_for`,
        // unmapped only here.
        let _ = unsafe { nix::sys::mman::munmap(self.at.cast(), self.len) };
    }
}

impl Appender {
    /// Writes `bytes` into `file` at `end`, the end of what was written so far.
    pub fn write_at(&mut self, file: &File, bytes: &[u8], end: u64) -> io::Result<()> {
        let Some(w) = self.window_for(file, end, bytes.len()) else {
            return file.write_all_at(bytes, end);
        };
        let offset = usize::try_from(end - w.start).map_err(io::Error::other)?;
        // SAFETY: `window_for` made the window cover `end..end + bytes.len()`, within the
        // file's reserved length; nothing else holds a reference into it.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), w.at.as_ptr().add(offset), bytes.len());
        }
        Ok(())
    }

    /// Lets go of the window, before the file is cut below its end.
    pub fn forget(&mut self) {
        self.window = None;
    }

    /// The window that holds `n` more bytes at `end`, reserved and mapped now when the one in
    /// hand does not; `None` when the file is written with `pwrite` (now or from before).
    fn window_for(&mut self, file: &File, end: u64, n: usize) -> Option<&Window> {
        if self.plain {
            return None;
        }
        let fits = |w: &Window| end + n as u64 <= w.start + w.len as u64;
        if !self.window.as_ref().is_some_and(fits) {
            self.window = None;
            let start = end / PAGE * PAGE;
            let size = end.next_power_of_two().clamp(FIRST_WINDOW, MAX_WINDOW);
            let len = (end - start + n as u64).div_ceil(size) * size;
            match map(file, start, len) {
                Ok(at) => {
                    self.window = Some(Window {
                        at,
                        start,
                        len: len as usize,
                    })
                }
                Err(e) => {
                    tracing::debug!("no mapped window for appending ({e}): written instead");
                    self.plain = true;
                    // What fallocate may have added past the end goes at once.
                    let _ = file.set_len(end);
                    return None;
                }
            }
        }
        self.window.as_ref()
    }
}

/// Reserves bytes `start..start + len` of `file` (extending it) and maps them.
fn map(file: &File, start: u64, len: u64) -> nix::Result<NonNull<u8>> {
    let (offset, length) = (
        i64::try_from(start).map_err(|_| nix::errno::Errno::EFBIG)?,
        i64::try_from(len).map_err(|_| nix::errno::Errno::EFBIG)?,
    );
    nix::fcntl::fallocate(file.as_raw_fd(), FallocateFlags::empty(), offset, length)?;
    let size = usize::try_from(len)
        .ok()
        .and_then(NonZeroUsize::new)
        .ok_or(nix::errno::Errno::EINVAL)?;
    // SAFETY: a shared mapping of a file the caller holds open, of blocks just reserved; the
    // caller cuts the file below the window only after `Appender::forget`.
    let at = unsafe {
        nix::sys::mman::mmap(
            None,
            size,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_SHARED,
            file,
            offset,
        )
    }?;
    Ok(at.cast())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes through windows read back as written, across windows' ends, with zeros after
    /// the end until the owner cuts the file; the windows start small and grow with the file;
    /// a file that cannot be mapped is written.
    #[test]
    fn what_is_written_through_windows_reads_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .expect("open");
        let mut a = Appender::default();
        let mut want = Vec::new();
        let line = vec![b'x'; 3000];
        let mut windows = Vec::new();
        while (want.len() as u64) < 2 * MAX_WINDOW + 10_000 {
            a.write_at(&file, &line, want.len() as u64).expect("write");
            want.extend_from_slice(&line);
            want.push(b'\n');
            a.write_at(&file, b"\n", want.len() as u64 - 1)
                .expect("write");
            let len = a.window.as_ref().map(|w| w.len as u64);
            if windows.last() != Some(&len) {
                windows.push(len);
            }
        }
        assert!(a.window.is_some() && !a.plain, "written through a window");
        // Small first, then as large as the file, up to the largest.
        let sizes: Vec<u64> = windows.iter().flatten().copied().collect();
        assert_eq!(sizes.first(), Some(&FIRST_WINDOW), "{sizes:?}");
        assert!(sizes.windows(2).all(|p| p[0] <= p[1]), "{sizes:?}");
        assert_eq!(sizes.last(), Some(&MAX_WINDOW), "{sizes:?}");
        assert!(sizes.len() < 12, "{sizes:?}");
        let got = std::fs::read(&path).expect("read");
        assert!(got.len() > want.len(), "reserved ahead");
        assert_eq!(&got[..want.len()], &want[..]);
        assert!(got[want.len()..].iter().all(|&b| b == 0));
        a.forget();
        file.set_len(want.len() as u64).expect("cut");
        assert_eq!(std::fs::read(&path).expect("read"), want);

        // A file open for writing only can be reserved, not mapped for writing (EACCES):
        // written from then on, and what the reservation added is cut at once.
        let path = dir.path().join("plain");
        std::fs::write(&path, b"first\n").expect("write");
        let wronly = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        let mut b = Appender::default();
        b.write_at(&wronly, b"second\n", 6).expect("write");
        b.write_at(&wronly, b"third\n", 13).expect("write");
        assert!(b.plain && b.window.is_none());
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "first\nsecond\nthird\n"
        );
    }
}
