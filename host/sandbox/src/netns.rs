//! What runs in the child between `fork` and `exec`: a private user and
//! network namespace, its loopback up, the proxy's listening socket handed
//! to the parent, then Landlock and seccomp. Only raw system calls on data
//! prepared before the fork: no allocation, no locks.

use crate::SandboxError;
use landlock::RulesetCreated;
use seccompiler::BpfProgram;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A Unix socket pair (close-on-exec) to pass the listener back.
pub(crate) fn socket_pair() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid two-element array for the kernel to fill.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error().into());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The id a host running as root has inside the sandbox.
const UNPRIVILEGED_ID: u32 = 1000;

/// Room for one `SCM_RIGHTS` control message with one descriptor.
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

/// The child's setup, built in the parent.
pub(crate) struct ChildSetup {
    ruleset: Option<RulesetCreated>,
    filters: Vec<BpfProgram>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// Where to send the proxy listener; `None`: no network at all.
    listener_to: Option<RawFd>,
}

impl ChildSetup {
    pub(crate) fn new(
        ruleset: RulesetCreated,
        filters: Vec<BpfProgram>,
        listener_to: Option<&OwnedFd>,
    ) -> Self {
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        // The same ids inside, so files keep their owners and `git` its
        // ownership checks; except root, which is not root inside: a
        // non-zero id loses every capability at `exec`.
        let inside = |id: u32| if id == 0 { UNPRIVILEGED_ID } else { id };
        Self {
            ruleset: Some(ruleset),
            filters,
            uid_map: format!("{} {uid} 1\n", inside(uid)).into_bytes(),
            gid_map: format!("{} {gid} 1\n", inside(gid)).into_bytes(),
            listener_to: listener_to.map(AsRawFd::as_raw_fd),
        }
    }

    /// Runs in the forked child. Any failure aborts the spawn with its OS
    /// error; the sandbox is never partly applied to a program that runs.
    pub(crate) fn run(&mut self) -> io::Result<()> {
        // SAFETY (whole function): raw system calls on memory owned by
        // `self`, which the fork copied; nothing allocates.
        unsafe {
            // Its own session: no controlling terminal to type into.
            check(libc::setsid())?;
            check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET))?;
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", &self.uid_map)?;
            write_file(c"/proc/self/gid_map", &self.gid_map)?;
            loopback_up()?;
            if let Some(to) = self.listener_to {
                let listener = proxy_listener()?;
                send_fd(to, listener)?;
                libc::close(listener);
            }
        }
        // Never run without the ruleset (a second call of this hook has none).
        let ruleset = self
            .ruleset
            .take()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let status = ruleset
            .restrict_self()
            .map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
        if status.ruleset == landlock::RulesetStatus::NotEnforced {
            return Err(io::Error::from_raw_os_error(libc::ENOSYS));
        }
        for f in &self.filters {
            seccompiler::apply_filter(f).map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
        }
        Ok(())
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; `data` is valid for its length.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(fd)?;
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n < 0 {
            return Err(err);
        }
        if n as usize != data.len() {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
    }
    Ok(())
}

unsafe fn loopback_up() -> io::Result<()> {
    // SAFETY: an `ifreq` on the stack names `lo`; the socket is closed.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        check(s)?;
        let mut req: libc::ifreq = std::mem::zeroed();
        for (d, b) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *d = *b as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let r = libc::ioctl(s, libc::SIOCSIFFLAGS, &req);
        libc::close(s);
        check(r)
    }
}

/// A listening TCP socket on the namespace's 127.0.0.1:[`PROXY_PORT`].
unsafe fn proxy_listener() -> io::Result<RawFd> {
    // SAFETY: a `sockaddr_in` on the stack; the socket is closed on failure.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        check(s)?;
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = crate::PROXY_PORT.to_be();
        addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let r = libc::bind(
            s,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        if r < 0 || libc::listen(s, 128) < 0 {
            let e = io::Error::last_os_error();
            libc::close(s);
            return Err(e);
        }
        Ok(s)
    }
}

/// Sends `fd` over the Unix socket `to` (`SCM_RIGHTS`).
unsafe fn send_fd(to: RawFd, fd: RawFd) -> io::Result<()> {
    // SAFETY: the control buffer is aligned and large enough for one fd.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut control = ControlBuffer([0; 64]);
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        let n = libc::sendmsg(to, &msg, libc::MSG_NOSIGNAL);
        if n != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives the listener the child sent (it did, before `exec` succeeded).
pub(crate) fn receive_listener(from: &OwnedFd) -> Result<std::net::TcpListener, SandboxError> {
    // SAFETY: as in `send_fd`, receiving side; the received descriptor is
    // owned by the returned listener.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut control = ControlBuffer([0; 64]);
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len() as _;
        let n = libc::recvmsg(
            from.as_raw_fd(),
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        );
        if n != 1 {
            return Err(io::Error::other("the sandboxed child sent no proxy socket").into());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::other("the sandboxed child sent no proxy socket").into());
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
        let listener = std::net::TcpListener::from_raw_fd(fd);
        listener.set_nonblocking(true)?;
        Ok(listener)
    }
}
