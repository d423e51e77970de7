/* bind_source.so — local cloud only: make an emulated instance's outgoing IPv4 TCP connections come from its private
 * IP, as they do on EC2. Every local instance shares the host's loopback, so without this a slurmd connects from
 * 127.0.0.1 and Slurm 26.05 records that as the node's NodeAddr at registration. LD_PRELOADed into the instance's
 * processes with ELASTIC_SLURM_BIND_ADDR=<private ip>; a socket already bound, or another family, is left alone. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    static connect_fn real_connect;
    if (!real_connect) real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
    const char *source = getenv("ELASTIC_SLURM_BIND_ADDR");
    if (source && addr && addr->sa_family == AF_INET) {
        const struct sockaddr_in *dest = (const struct sockaddr_in *)addr;
        struct sockaddr_in mine;
        socklen_t mine_len = sizeof(mine);
        int type = 0;
        socklen_t type_len = sizeof(type);
        int unbound = getsockname(fd, (struct sockaddr *)&mine, &mine_len) == 0 && mine.sin_family == AF_INET &&
                      mine.sin_port == 0 && mine.sin_addr.s_addr == htonl(INADDR_ANY);
        int loopback_dest = (ntohl(dest->sin_addr.s_addr) >> 24) == 127;
        if (unbound && loopback_dest && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) == 0 &&
            type == SOCK_STREAM) {
            struct sockaddr_in bind_addr;
            memset(&bind_addr, 0, sizeof(bind_addr));
            bind_addr.sin_family = AF_INET;
            if (inet_pton(AF_INET, source, &bind_addr.sin_addr) == 1)
                (void)bind(fd, (struct sockaddr *)&bind_addr, sizeof(bind_addr));
        }
    }
    return real_connect(fd, addr, len);
}
