'use strict';
// bench.js - node-redlock (the npm package redlock, over ioredis) on
// workloads U and C of bench/redislock-bench.c, against the masters of a
// quorum, printing one JSON line per run in the same shape, so that
// bench/run.sh can set it beside redislock's quorum client (issue 11).
//
// Usage: node bench.js --workload U|C --masters URL,URL,... [options]
//   --port P          C: the server of the racy counter (required for C)
//   --n N             U: cycles (20000)
//   --k K, --m M      C: processes (8) x critical sections each (500)
//   --retry-delay MS, --retry-jitter MS
//                     C: redlock's pause between its retries (without
//                     end), delay + floor(uniform(-jitter, jitter)):
//                     3 and 2 (1 to 4 ms) by default
//   --label L         U: the "client" field (node-redlock)
//   --no-cpu-dma-latency
//                     do not hold /dev/cpu_dma_latency at 0
//
// U: lock + unlock cycles on one key, one Redlock over one ioredis
// connection per master.  C: K processes (child_process.fork), each with
// its own connections, meet at a barrier, then M critical sections each
// on one key around a GET then SET+1 of a counter on --port, checked at
// the end.  The lock's TTL is 10500 ms, the PX redislock-bench's handles
// write (expiry 10 s + 500 ms); driftFactor 0.01, as redislock's quorum.
// Like redislock-bench, every process holds /dev/cpu_dma_latency at 0
// while it measures (when it can) and says so.  Exit status: 0; 1 if a
// run failed (a lost update, an unlock without a majority, a client
// error); 2 on a usage error.
const fs = require('fs');
const path = require('path');
const { fork } = require('child_process');
const Redis = require('ioredis');
const Redlock = require('redlock');

const TTL_MS = 10500;
const KEY_C = 'bench:C:node-redlock';
const COUNTER = 'bench:C:counter';

function usage(msg) {
  process.stderr.write(`node-redlock bench: ${msg} (see the top of ${path.basename(__filename)})\n`);
  process.exit(2);
}

function die(what, err) {
  process.stderr.write(`node-redlock bench: ${what}${err ? `: ${err.message || err}` : ''}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const o = {
    workload: null, masters: [], port: 0, n: 20000, k: 8, m: 500,
    retryDelay: 3, retryJitter: 2, label: 'node-redlock',
    dma: true, worker: false,
  };
  const num = (i) => {
    const v = Number(argv[i]);
    if (!Number.isInteger(v) || v < 0) usage(`${argv[i - 1]} takes a whole number`);
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    switch (argv[i]) {
      case '--workload': o.workload = argv[++i]; break;
      case '--masters': o.masters = String(argv[++i]).split(',').filter(Boolean); break;
      case '--port': o.port = num(++i); break;
      case '--n': o.n = num(++i); break;
      case '--k': o.k = num(++i); break;
      case '--m': o.m = num(++i); break;
      case '--retry-delay': o.retryDelay = num(++i); break;
      case '--retry-jitter': o.retryJitter = num(++i); break;
      case '--label': o.label = argv[++i]; break;
      case '--no-cpu-dma-latency': o.dma = false; break;
      case '--worker': o.worker = true; break;
      default: usage(`unknown argument ${argv[i]}`);
    }
  }
  if (o.workload !== 'U' && o.workload !== 'C') usage('--workload is U or C');
  if (o.masters.length === 0) usage('--masters is required');
  if (o.workload === 'C' && o.port <= 0) usage('C needs --port');
  if (o.n < 1 || o.k < 1 || o.m < 1) usage('--n, --k and --m are at least 1');
  // redlock reads retryDelay with ||: 0 would mean its default, 200 ms.
  if (o.retryDelay < 1) usage('--retry-delay is at least 1');
  return o;
}

// Ask the kernel to keep CPUs out of deep idle states for as long as the
// file stays open (the process's life), as redislock-bench does.
function holdCpuDmaLatency(o) {
  if (!o.dma) return 'unavailable: --no-cpu-dma-latency';
  try {
    const fd = fs.openSync('/dev/cpu_dma_latency', 'w');
    fs.writeSync(fd, Buffer.alloc(4)); // a 32-bit 0; the fd is never closed
    return '0 held';
  } catch (e) {
    return `unavailable: ${e.code || e.message}`;
  }
}

const nowUs = () => Number(process.hrtime.bigint() / 1000n);

// One ioredis connection, ready (its errors end the run).
async function connect(url) {
  const c = new Redis(url, { maxRetriesPerRequest: 0, enableOfflineQueue: true });
  c.on('error', (e) => die(`connection to ${url}`, e));
  await c.ping();
  return c;
}

function newRedlock(clients, o, retryCount) {
  const r = new Redlock(clients, {
    driftFactor: 0.01,
    retryCount,
    retryDelay: o.retryDelay,
    retryJitter: o.retryJitter,
  });
  r.on('clientError', (e) => die('redlock client error', e));
  return r;
}

// Calls of the script commands so far (INFO commandstats).
async function scriptCalls(c) {
  const info = await c.info('commandstats');
  let n = 0;
  for (const cmd of ['evalsha', 'eval']) {
    const m = info.match(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`));
    if (m) n += Number(m[1]);
  }
  return n;
}

function pct(sorted, p) {
  return sorted.length ? sorted[Math.round(p * (sorted.length - 1))] : 0;
}

function report(workload, ops, elapsedUs, lat, extra, dma) {
  const secs = elapsedUs / 1e6;
  const s = Float64Array.from(lat).sort();
  const versions = `"redlock":"${require('redlock/package.json').version}",` +
    `"ioredis":"${require('ioredis/package.json').version}"`;
  process.stdout.write(`{"peer":"node-redlock","workload":"${workload}","ops":${ops},` +
    `"seconds":${secs.toFixed(3)},"ops_per_s":${(secs > 0 ? ops / secs : 0).toFixed(0)},` +
    `"p50_us":${pct(s, 0.5)},"p99_us":${pct(s, 0.99)}${extra},${versions},` +
    `"cpu_dma_latency":"${dma}"}\n`);
}

// ------------------------------------------------------------------- U

async function runU(o, dma) {
  const clients = await Promise.all(o.masters.map(connect));
  const stats = await connect(o.masters[0]);
  const redlock = newRedlock(clients, o, 0);
  const key = `bench:U:${o.label}`;
  const lat = new Array(o.n);
  const cycle = async () => {
    // Uncontended: a refusal (LockError) or a failed unlock ends the run.
    const lock = await redlock.lock(key, TTL_MS);
    await lock.unlock();
  };
  for (let i = 0; i < 1000 && i < o.n; i++) await cycle();
  const calls0 = await scriptCalls(stats);
  const start = nowUs();
  for (let i = 0; i < o.n; i++) {
    const t0 = nowUs();
    await cycle();
    lat[i] = nowUs() - t0;
  }
  const elapsed = nowUs() - start;
  const perOp = (await scriptCalls(stats) - calls0) / (2 * o.n);
  report('U', o.n, elapsed, lat,
    `,"client":"${o.label}","masters":${o.masters.length},"evalsha_per_op":${perOp.toFixed(3)}`,
    dma);
  await Promise.all([...clients, stats].map((c) => c.quit()));
}

// ------------------------------------------------------------------- C

// A worker: connect, say ready, wait for the go, then M sections; send
// back the refused tries, the time after the last unlock and the waits.
async function worker(o) {
  const clients = await Promise.all(o.masters.map(connect));
  const counter = await connect(`redis://127.0.0.1:${o.port}`);
  const redlock = newRedlock(clients, o, -1); // retries without end
  const lat = new Array(o.m);
  let refused = 0;
  const go = new Promise((resolve) => process.once('message', resolve));
  process.send({ ready: true });
  await go;
  for (let i = 0; i < o.m; i++) {
    const t0 = nowUs();
    const lock = await redlock.lock(KEY_C, TTL_MS);
    refused += lock.attempts - 1;
    lat[i] = nowUs() - t0;
    const v = Number(await counter.get(COUNTER)) || 0;
    await counter.set(COUNTER, v + 1);
    await lock.unlock(); // rejects without a majority: the run fails
  }
  const finished = nowUs();
  await new Promise((resolve) => process.send({ refused, finished, lat }, resolve));
  await Promise.all([...clients, counter].map((c) => c.quit()));
}

async function runC(o, dma) {
  const counter = await connect(`redis://127.0.0.1:${o.port}`);
  const stats = await connect(o.masters[0]);
  await counter.del(COUNTER);
  const children = [];
  const ready = [];
  const done = [];
  for (let i = 0; i < o.k; i++) {
    const child = fork(__filename, [...process.argv.slice(2), '--worker'],
      { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    ready.push(new Promise((resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', () => reject(new Error('a worker failed to start')));
    }));
    done.push(new Promise((resolve) => {
      let result = null;
      child.on('message', (msg) => { if (msg.lat) result = msg; });
      child.on('exit', (code) => resolve(code === 0 ? result : null));
    }));
  }
  try {
    await Promise.all(ready);
  } catch (e) {
    children.forEach((c) => c.kill('SIGKILL'));
    die('barrier', e);
  }
  const calls0 = await scriptCalls(stats);
  const start = nowUs();
  children.forEach((c) => c.send('go'));
  const results = await Promise.all(done);
  const failed = results.some((r) => r === null);
  const lat = [];
  let refused = 0;
  let finished = 0;
  for (const r of results.filter(Boolean)) {
    lat.push(...r.lat);
    refused += r.refused;
    finished = Math.max(finished, r.finished);
  }
  if (finished === 0) finished = nowUs();
  const sections = o.k * o.m;
  const value = Number(await counter.get(COUNTER));
  const perCs = (await scriptCalls(stats) - calls0) / sections;
  const how = `,"retry_count":-1,"retry_delay_ms":${o.retryDelay},` +
    `"retry_jitter_ms":${o.retryJitter}`;
  report('C', sections, finished - start, lat,
    `,"wait":true,"k":${o.k},"m":${o.m},"refused_tries":${refused},` +
    `"scripts_per_cs":${perCs.toFixed(2)},"blpop_per_cs":0.00,"counter":${value},` +
    `"counter_ok":${value === sections},"masters":${o.masters.length}${how},"ttl_ms":${TTL_MS}`,
    dma);
  await Promise.all([counter, stats].map((c) => c.quit()));
  if (failed) die('a worker failed');
  if (value !== sections) die(`LOST UPDATE: counter ${value}, expected ${sections}`);
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const dma = holdCpuDmaLatency(o);
  if (o.worker) await worker(o);
  else if (o.workload === 'U') await runU(o, dma);
  else await runC(o, dma);
}

main().then(() => process.exit(0), (e) => die('failed', e));
