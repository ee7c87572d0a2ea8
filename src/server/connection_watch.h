// Whether the client of a request has hung up, asked while the request is still queued or
// being prefilled (no bytes to write yet, so no failed write can tell).
//
// cpp-httplib 0.11 (Debian's) gives a handler neither its socket nor a "closed?" query. It does
// give the connection's two addresses (Request::local_addr/port, remote_addr/port), and a TCP
// connection's address pair is unique among this process's sockets, so the watch finds the
// connection's descriptor by that pair and then peeks at it. The descriptor stays the
// connection's for as long as the handler (and a streamed response's content provider) runs:
// httplib closes it only after both have returned. Finding it costs one scan of /proc/self/fd
// per request (a few system calls per open descriptor), each check one poll() and at most one
// recv(MSG_PEEK).
#pragma once
#include <string>

namespace mp::server {

class ConnectionWatch {
 public:
  ConnectionWatch() = default;  // watches nothing: client_gone() is always false
  // The socket connected from remote to local (addresses as httplib reports them: numeric
  // host, port). Not found (a non-socket transport): an empty watch.
  static ConnectionWatch find(const std::string& local_addr, int local_port, const std::string& remote_addr,
                              int remote_port);

  bool watching() const { return fd_ >= 0; }
  // True once the peer closed the connection or shut down its sending side (end of stream), or
  // the socket reports an error. Bytes waiting to be read (a pipelined next request) are not a
  // hang-up. Never blocks.
  bool client_gone() const;

 private:
  explicit ConnectionWatch(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace mp::server
