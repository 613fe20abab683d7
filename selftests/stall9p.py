#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A 9P2000.L file server that never answers reads, mounted on itself (run as root).

    stall9p.py DIR [--marker FILE] [--size BYTES] [--msize BYTES]

Serves a root directory holding one regular file, `f` (1 MiB of zeros unless --size
says otherwise), over one end of a socketpair, and mounts it at DIR through the other
end: `mount -t 9p -o trans=fd,rfdno=N,wfdno=N,version=9p2000.L ...`, the kernel taking
the descriptor while mount(8) runs, so the server answers the mount's requests as they
come. Prints "mounted DIR pid PID" once the mount is there (PID is the one to signal).

Tversion, Tattach, Twalk, Tgetattr, Tlopen, Tclunk and Tflush are answered; anything
else gets Rlerror (EOPNOTSUPP, ENOENT for a name other than `f`). A Tread is not
answered: its tag is kept, and the first one creates the --marker file and prints
"read pending". Whoever reads the file (a process, or a kernel thread faulting its
pages in) sleeps until:
  SIGUSR1  every pending read is answered (zeros) and later ones are answered at once;
  SIGTERM  the server exits and closes its socket: the pending requests fail (EIO).
A Tflush forgets the read it names. Exits by itself if the mount fails or the kernel
closes its end. The message layouts are those of the kernel's client
(include/net/9p/9p.h, net/9p/protocol.c)."""
import argparse
import errno
import os
import select
import signal
import socket
import stat
import struct
import subprocess
import sys

# Message types.
RLERROR = 7
TGETATTR, RGETATTR = 24, 25
TLOPEN, RLOPEN = 12, 13
TREADDIR = 40
TVERSION, RVERSION = 100, 101
TATTACH, RATTACH = 104, 105
TFLUSH, RFLUSH = 108, 109
TWALK, RWALK = 110, 111
TREAD, RREAD = 116, 117
TCLUNK, RCLUNK = 120, 121

QTDIR, QTFILE = 0x80, 0x00
STATS_BASIC = 0x7FF
HDR = 7                 # size[4] type[1] tag[2]
RREAD_HDR = HDR + 4     # and count[4]

ROOT, FILE = "root", "f"


def qid(node):
    """type[1] version[4] path[8]"""
    return struct.pack("<BIQ", QTDIR if node == ROOT else QTFILE, 0, 1 if node == ROOT else 2)


def string(s):
    b = s.encode()
    return struct.pack("<H", len(b)) + b


class Server:
    def __init__(self, sock, size, msize, marker):
        self.sock = sock
        self.size = size
        self.msize = msize
        self.marker = marker
        self.fids = {}          # fid -> ROOT or FILE
        self.pending = {}       # tag -> (offset, count)
        self.release = False
        self.seen_read = False
        self.inbuf = b""
        self.outbuf = b""

    def reply(self, mtype, tag, body=b""):
        self.outbuf += struct.pack("<IBH", HDR + len(body), mtype, tag) + body

    def error(self, tag, code):
        self.reply(RLERROR, tag, struct.pack("<I", code))

    def rread(self, tag, offset, count):
        count = min(count, self.msize - RREAD_HDR, max(0, self.size - offset))
        self.reply(RREAD, tag, struct.pack("<I", count) + bytes(count))

    def answer_pending(self):
        for tag, (offset, count) in sorted(self.pending.items()):
            self.rread(tag, offset, count)
        self.pending.clear()

    def getattr(self, node):
        if node == ROOT:
            mode, nlink, size = stat.S_IFDIR | 0o555, 2, 0
        else:
            mode, nlink, size = stat.S_IFREG | 0o444, 1, self.size
        # valid[8] qid[13] mode[4] uid[4] gid[4] nlink[8] rdev[8] size[8] blksize[8]
        # blocks[8], then atime, mtime, ctime, btime (sec[8] nsec[8] each), gen[8] and
        # data_version[8].
        return (struct.pack("<Q", STATS_BASIC) + qid(node) +
                struct.pack("<III", mode, 0, 0) +
                struct.pack("<QQQQQ", nlink, 0, size, 4096, (size + 511) // 512) +
                bytes(8 * 10))

    def handle(self, mtype, tag, body):
        if mtype == TVERSION:
            msize, n = struct.unpack_from("<IH", body)
            version = body[6:6 + n].decode(errors="replace")
            self.msize = min(self.msize, msize)
            self.reply(RVERSION, tag, struct.pack("<I", self.msize) +
                       string("9P2000.L" if version == "9P2000.L" else "unknown"))
        elif mtype == TATTACH:
            (fid,) = struct.unpack_from("<I", body)
            self.fids[fid] = ROOT
            self.reply(RATTACH, tag, qid(ROOT))
        elif mtype == TWALK:
            fid, newfid, nwname = struct.unpack_from("<IIH", body)
            node = self.fids.get(fid)
            if node is None:
                return self.error(tag, errno.EBADF)
            at, qids = 10, []
            for _ in range(nwname):
                (n,) = struct.unpack_from("<H", body, at)
                name = body[at + 2:at + 2 + n].decode(errors="replace")
                at += 2 + n
                if node == ROOT and name == FILE:
                    node = FILE
                elif node == ROOT and name in (".", ".."):
                    pass
                else:
                    break
                qids.append(qid(node))
            if len(qids) < nwname and not qids:
                return self.error(tag, errno.ENOENT)
            if len(qids) == nwname:
                self.fids[newfid] = node
            self.reply(RWALK, tag, struct.pack("<H", len(qids)) + b"".join(qids))
        elif mtype == TGETATTR:
            (fid,) = struct.unpack_from("<I", body)
            if fid not in self.fids:
                return self.error(tag, errno.EBADF)
            self.reply(RGETATTR, tag, self.getattr(self.fids[fid]))
        elif mtype == TLOPEN:
            (fid,) = struct.unpack_from("<I", body)
            if fid not in self.fids:
                return self.error(tag, errno.EBADF)
            self.reply(RLOPEN, tag, qid(self.fids[fid]) + struct.pack("<I", 0))
        elif mtype == TCLUNK:
            (fid,) = struct.unpack_from("<I", body)
            self.fids.pop(fid, None)
            self.reply(RCLUNK, tag)
        elif mtype == TFLUSH:
            (oldtag,) = struct.unpack_from("<H", body)
            if self.pending.pop(oldtag, None):
                print(f"read of tag {oldtag} flushed", flush=True)
            self.reply(RFLUSH, tag)
        elif mtype == TREAD:
            fid, offset, count = struct.unpack_from("<IQI", body)
            if self.fids.get(fid) != FILE:
                return self.error(tag, errno.EISDIR if fid in self.fids else errno.EBADF)
            if self.release:
                return self.rread(tag, offset, count)
            self.pending[tag] = (offset, count)
            if not self.seen_read:
                self.seen_read = True
                print(f"read pending (offset {offset}, count {count})", flush=True)
                if self.marker:
                    with open(self.marker, "w") as f:
                        f.write(f"{offset} {count}\n")
        else:
            self.error(tag, errno.EOPNOTSUPP)

    def receive(self, data):
        self.inbuf += data
        while len(self.inbuf) >= HDR:
            size, mtype, tag = struct.unpack_from("<IBH", self.inbuf)
            if size < HDR or size > self.msize + 4096:
                raise ValueError(f"bad message size {size}")
            if len(self.inbuf) < size:
                break
            body, self.inbuf = self.inbuf[HDR:size], self.inbuf[size:]
            self.handle(mtype, tag, body)

    def flush_out(self):
        while self.outbuf:
            n = self.sock.send(self.outbuf)
            self.outbuf = self.outbuf[n:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--marker")
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--msize", type=int, default=65536)
    args = ap.parse_args()

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    srv = Server(ours, args.size, args.msize, args.marker)
    # Signals only wake the loop up; the loop does the work.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    got = set()

    def note(sig, _frame):
        got.add(sig)
    signal.signal(signal.SIGUSR1, note)
    signal.signal(signal.SIGTERM, note)
    signal.set_wakeup_fd(wake_w)

    fd = theirs.fileno()
    opts = (f"trans=fd,rfdno={fd},wfdno={fd},version=9p2000.L,msize={args.msize},"
            "access=any,noxattr")
    mount = subprocess.Popen(["mount", "-t", "9p", "-o", opts, "none", args.dir],
                             pass_fds=(fd,))
    mounted = False
    while True:
        if not mounted and mount.poll() is not None:
            if mount.returncode:
                print(f"mount failed ({mount.returncode})", flush=True)
                return 1
            mounted = True
            # The kernel holds its own reference to that end now.
            theirs.close()
            print(f"mounted {args.dir} pid {os.getpid()}", flush=True)
        try:
            ready, _, _ = select.select([ours, wake_r], [], [], 0.1)
        except InterruptedError:
            ready = []
        if wake_r in ready:
            os.read(wake_r, 64)
        if signal.SIGTERM in got:
            print(f"exiting, {len(srv.pending)} read(s) unanswered", flush=True)
            return 0
        if signal.SIGUSR1 in got and not srv.release:
            srv.release = True
            print(f"released: answering {len(srv.pending)} pending read(s)", flush=True)
            srv.answer_pending()
        if ours in ready:
            data = ours.recv(1 << 20)
            if not data:
                print("the kernel closed the connection", flush=True)
                return 0
            srv.receive(data)
        srv.flush_out()


if __name__ == "__main__":
    sys.exit(main())
