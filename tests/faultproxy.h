/*
 * faultproxy.h - a fault-injecting TCP proxy for the test suite.
 *
 * A test starts a proxy in front of a redis-server, connects its client
 * to the proxy's port instead of the server's, and then breaks the
 * network between the two on purpose: commands held back and delivered
 * late, replies lost, every chunk delayed, a stalled link, connections
 * reset.  Everything runs inside the test process: one thread per proxy,
 * which accepts on 127.0.0.1 and forwards each connection to the server
 * through non-blocking sockets and poll().
 *
 * Threads.  The controls below may be called from any thread, also while
 * traffic flows and while other threads call other controls; they are
 * serialised, and each one returns only once the proxy's thread has put
 * it into effect (so "fp_hold(p); send()" never races).  fp_start() and
 * fp_stop() are not controls: one thread starts a proxy, and no control
 * may still be running, or be called, when fp_stop() begins.
 *
 * Connections "open at this moment" include those whose TCP handshake the
 * kernel has completed but that the proxy has not accept()ed yet: every
 * control first accepts whatever is waiting.  So a client that has
 * returned from connect() is always affected by a later fp_hold() or
 * fp_cut().
 *
 * Buffering.  At most FP_QUEUE_MAX bytes per direction and connection
 * are kept in the proxy; beyond that it stops reading that side, and the
 * kernel's socket buffers fill, as on a real network.
 *
 * Not for production: the proxy trusts its loopback peers, and on an
 * allocation failure it retries later rather than reporting it.
 */
#ifndef REDISLOCK_FAULTPROXY_H
#define REDISLOCK_FAULTPROXY_H

#include <stddef.h>

#define FP_QUEUE_MAX (1024 * 1024)

typedef struct fp_proxy fp_proxy;

/*
 * Start a proxy to HOST:PORT (HOST is a name or a numeric address; it is
 * resolved once, here).  The proxy listens on 127.0.0.1 on a port the
 * kernel chooses (see fp_port()) and forwards every accepted connection
 * to a new connection to HOST:PORT; bytes flow unchanged in both
 * directions until a control says otherwise.  A half-close is passed on
 * (EOF from one side becomes shutdown(SHUT_WR) towards the other once
 * everything before it was forwarded); a connection ends when both
 * directions have ended, or at once when the server side fails (the
 * client is then closed too).  If the server cannot be reached, the
 * client connection is closed.
 *
 * Returns NULL on any failure (name resolution, socket, thread, memory),
 * with nothing left behind.  Free with fp_stop().
 */
fp_proxy *fp_start(const char *host, int port);

/*
 * The port the proxy listens on (on 127.0.0.1).  Constant for the life of
 * the proxy; any thread.
 */
int fp_port(const fp_proxy *p);

/*
 * Stop the proxy: reset every connection it still has (both sides, with
 * RST, held bytes are dropped), close the listening socket, join its
 * thread and free everything.  Accepts NULL.  No other call on P may run
 * concurrently or follow.
 */
void fp_stop(fp_proxy *p);

/*
 * Hold client-to-server bytes on the connections open now: from the
 * moment fp_hold() returns, bytes those clients send (and bytes of theirs
 * the proxy had read but not yet forwarded) are kept in the proxy and not
 * passed on, as a command delayed in the network.  Connections accepted
 * later flow normally.  Server-to-client bytes still flow.  If such a
 * client closes its side, or its connection fails, while bytes are held,
 * the proxy keeps the server side open: the held bytes are still
 * delivered on fp_release(), and only then is the server side closed (a
 * command arriving after its sender gave up).  Holding again adds the
 * connections opened since.  Thread-safe.
 */
void fp_hold(fp_proxy *p);

/*
 * Release every held connection: the bytes held are forwarded, in order,
 * as far as the server's socket takes them before fp_release() returns
 * (the rest follows as soon as it can), and the connections then flow
 * normally.  Without a hold in force it does nothing.  Thread-safe.
 */
void fp_release(fp_proxy *p);

/*
 * While ON is non-zero, server-to-client bytes are discarded, on every
 * connection, old and new: replies are lost while the commands still
 * reach the server.  Bytes already queued for a client when ON is set
 * are discarded too.  ON = 0 restores normal flow for bytes read from
 * then on.  Thread-safe.
 */
void fp_drop_replies(fp_proxy *p, int on);

/*
 * Forward every chunk the proxy reads from now on, in both directions,
 * MS milliseconds after it was read (0, or a negative MS, turns the delay
 * off).  Chunks already read keep the time they were given; order is
 * always kept.  Thread-safe.
 */
void fp_delay_ms(fp_proxy *p, long ms);

/*
 * While ON is non-zero, the proxy neither reads nor writes on any
 * connection, old or new (new ones are still accepted and their server
 * side connected by the kernel, but nothing moves on them): a stalled
 * network, where bytes sit in the kernel's socket buffers rather than in
 * the proxy, and neither side sees EOF or an error.  ON = 0 resumes, and
 * whatever the sockets hold then flows.  Thread-safe.
 */
void fp_stall(fp_proxy *p, int on);

/*
 * Reset every connection open now, both sides, at once: each socket is
 * closed with SO_LINGER 0, so the peers see RST (ECONNRESET) rather than
 * EOF.  Bytes queued or held for those connections are dropped.  The
 * proxy keeps listening; new connections flow normally (with whatever
 * drop, delay or stall setting is in force).  Thread-safe.
 */
void fp_cut(fp_proxy *p);

/*
 * The number of client connections accepted so far (including any the
 * kernel had completed and the proxy accepts on this call), whether still
 * open or not.  Thread-safe.
 */
size_t fp_connections(fp_proxy *p);

/*
 * The number of client-to-server bytes currently held by fp_hold() in the
 * proxy, over all connections; bytes a client had sent before the call
 * are counted.  0 after fp_release() or fp_cut().  Thread-safe.
 */
size_t fp_held_bytes(fp_proxy *p);

/*
 * The number of connections the proxy has open now (both sides, or the
 * server side kept for held bytes), and how many of those have seen their
 * client's side end (EOF or an error: the client closed or went away).
 * Like every control they first accept and service what is waiting, so
 * they tell a test when the proxy has noticed a client's close, instead
 * of the test sleeping for it.  Thread-safe.
 */
size_t fp_open_connections(fp_proxy *p);
size_t fp_clients_ended(fp_proxy *p);

#endif /* REDISLOCK_FAULTPROXY_H */
