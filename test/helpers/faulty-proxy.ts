import { connect, createServer, type Socket } from 'node:net'
import type { Test } from 'tap'
import { listenOnLoopback } from './servers.js'

/**
 * A TCP proxy in front of a real Redis with faults the test controls, after
 * Shopify's toxiproxy (its `timeout`, `latency` and `reset_peer` toxics): a
 * command that runs and loses its reply, a command that never arrives, a
 * reply held back past the client's command timeout, every connection reset.
 * A fault is armed for the next command whose bytes hold a text (a key), so
 * the client's own handshake and other commands pass untouched.
 */
export interface FaultyProxy {
  /** `redis://127.0.0.1:PORT/0`, through the proxy. */
  readonly url: string
  /**
   * The next command holding `text` is forwarded and runs; its reply is
   * dropped and the connection cut. Resolves once it happened. A `NOSCRIPT`
   * reply (the script did not run; ioredis sends it again as `EVAL`) passes.
   */
  cutReply(text: string): Promise<void>
  /** The next command holding `text` never reaches Redis: the connection is reset instead. Resolves once it happened. */
  dropCommand(text: string): Promise<void>
  /**
   * The reply to the next command holding `text` arrives `ms` late, and the
   * replies after it on that connection behind it. Resolves once it was passed on.
   */
  delayReply(text: string, ms: number): Promise<void>
  /** Resets every open connection now (both sides). */
  reset(): void
  /** Forgets the faults armed and not met yet. */
  disarm(): void
  /** How many connections the proxy accepted so far. */
  readonly connections: number
}

interface Fault {
  readonly kind: 'cut' | 'drop' | 'delay'
  readonly text: string
  readonly ms: number
  readonly done: () => void
}

interface Pair {
  readonly client: Socket
  readonly upstream: Socket
  /** A fault whose command went up on this connection, waiting for its reply. */
  awaiting: Fault | undefined
  /** Replies on this connection, passed on in order, each once its delay is over. */
  chain: Promise<void>
}

function wait(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** Starts the proxy on a free loopback port in front of `redisPort`; closed, every connection with it, when the test ends. */
export async function startFaultyProxy(t: Test, redisPort: number): Promise<FaultyProxy> {
  const pairs = new Set<Pair>()
  const faults: Fault[] = []
  let connections = 0
  const cut = (pair: Pair) => {
    pairs.delete(pair)
    // Reset towards the client, as a lost connection looks; Redis's side is only closed (resetting it too can hang Node's exit).
    pair.client.resetAndDestroy()
    pair.upstream.destroy()
  }
  // A side that closed by itself: the other is ended, not reset, so that what it was sent still arrives.
  const end = (pair: Pair) => {
    pairs.delete(pair)
    pair.client.end()
    pair.upstream.end()
  }
  const server = createServer((client) => {
    connections++
    const upstream = connect(redisPort, '127.0.0.1')
    const pair: Pair = { client, upstream, awaiting: undefined, chain: Promise.resolve() }
    pairs.add(pair)
    client.on('error', () => cut(pair))
    upstream.on('error', () => cut(pair))
    client.on('close', () => end(pair))
    // Redis closing a connection (after QUIT) still has its last replies passed on first.
    upstream.on('close', () => void pair.chain.then(() => end(pair)))
    client.on('data', (chunk: Buffer) => {
      const index = faults.findIndex((fault) => chunk.includes(fault.text))
      const fault = faults[index]
      if (fault === undefined) {
        upstream.write(chunk)
        return
      }
      faults.splice(index, 1)
      if (fault.kind === 'drop') {
        cut(pair)
        fault.done()
        return
      }
      pair.awaiting = fault
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => {
      const fault = pair.awaiting
      pair.awaiting = undefined
      if (fault?.kind === 'cut' && chunk.subarray(0, 9).toString() === '-NOSCRIPT') {
        faults.push(fault)
      } else if (fault?.kind === 'cut') {
        cut(pair)
        fault.done()
        return
      }
      const delayed = fault?.kind === 'delay' ? fault : undefined
      pair.chain = pair.chain.then(async () => {
        if (delayed !== undefined) await wait(delayed.ms)
        if (!client.destroyed) client.write(chunk)
        delayed?.done()
      })
    })
  })
  const port = await listenOnLoopback(server)
  t.teardown(async () => {
    for (const pair of [...pairs]) cut(pair)
    await new Promise((resolve) => server.close(resolve))
  })
  const arm = (kind: Fault['kind'], text: string, ms = 0) =>
    new Promise<void>((resolve) => {
      faults.push({ kind, text, ms, done: resolve })
    })
  return {
    url: `redis://127.0.0.1:${port}/0`,
    cutReply: (text) => arm('cut', text),
    dropCommand: (text) => arm('drop', text),
    delayReply: (text, ms) => arm('delay', text, ms),
    reset: () => {
      for (const pair of [...pairs]) cut(pair)
    },
    disarm: () => {
      faults.length = 0
    },
    get connections() {
      return connections
    },
  }
}
