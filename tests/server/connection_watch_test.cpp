// ConnectionWatch finds a connection's socket by its address pair and tells a hang-up from a
// live connection, including one with unread (pipelined) bytes.
#include "server/connection_watch.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace mp::server {
namespace {

struct Pair {
  int client = -1, server = -1;
  int client_port = 0, server_port = 0;
  ~Pair() {
    if (client >= 0) close(client);
    if (server >= 0) close(server);
  }
};

int port_of(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  (peer ? getpeername : getsockname)(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// A loopback TCP connection, both ends in this process (as in the server tests).
void connect_pair(Pair& p) {
  const int lst = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(lst, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(lst, 1), 0);
  socklen_t len = sizeof a;
  getsockname(lst, reinterpret_cast<sockaddr*>(&a), &len);
  p.client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(p.client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  p.server = accept(lst, nullptr, nullptr);
  ASSERT_GE(p.server, 0);
  close(lst);
  p.server_port = port_of(p.server, false);
  p.client_port = port_of(p.server, true);
}

ConnectionWatch watch_server_end(const Pair& p) {
  return ConnectionWatch::find("127.0.0.1", p.server_port, "127.0.0.1", p.client_port);
}

TEST(ConnectionWatch, FindsTheServerEndNotTheClientEnd) {
  Pair p;
  connect_pair(p);
  const ConnectionWatch w = watch_server_end(p);
  ASSERT_TRUE(w.watching());
  EXPECT_FALSE(w.client_gone());
  // The client end has the same addresses the other way round; the watch must not pick it,
  // or a close of the server end would go unseen. Closing the client is seen only through the
  // server end.
  close(p.client);
  p.client = -1;
  EXPECT_TRUE(w.client_gone());
}

TEST(ConnectionWatch, UnknownAddressesWatchNothing) {
  Pair p;
  connect_pair(p);
  EXPECT_FALSE(ConnectionWatch::find("127.0.0.1", p.server_port, "127.0.0.1", p.server_port).watching());
  EXPECT_FALSE(ConnectionWatch::find("127.0.0.2", p.server_port, "127.0.0.1", p.client_port).watching());
  EXPECT_FALSE(ConnectionWatch::find("", -1, "", -1).watching());
  EXPECT_FALSE(ConnectionWatch().client_gone());
}

TEST(ConnectionWatch, PipelinedBytesAreNotAHangUpAndStayUnread) {
  Pair p;
  connect_pair(p);
  const ConnectionWatch w = watch_server_end(p);
  ASSERT_TRUE(w.watching());
  ASSERT_EQ(send(p.client, "GET /", 5, 0), 5);
  usleep(20000);
  EXPECT_FALSE(w.client_gone());
  char buf[8];
  EXPECT_EQ(recv(p.server, buf, sizeof buf, MSG_DONTWAIT), 5);  // the peek consumed nothing
  EXPECT_EQ(std::string(buf, 5), "GET /");
}

TEST(ConnectionWatch, HalfCloseAndCloseWithUnreadBytesAreHangUps) {
  {
    Pair p;
    connect_pair(p);
    const ConnectionWatch w = watch_server_end(p);
    shutdown(p.client, SHUT_WR);
    usleep(20000);
    EXPECT_TRUE(w.client_gone());
  }
  {
    Pair p;
    connect_pair(p);
    const ConnectionWatch w = watch_server_end(p);
    ASSERT_EQ(send(p.client, "x", 1, 0), 1);
    close(p.client);
    p.client = -1;
    usleep(20000);
    EXPECT_TRUE(w.client_gone());
  }
}

}  // namespace
}  // namespace mp::server
