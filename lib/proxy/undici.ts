import { createRequire } from 'node:module'
import type { buildConnector as BuildConnector, Pool as UndiciPool } from 'undici'

// undici's entry point loads all of it (fetch, WebSocket, caches, mock agents: 109 modules, over 1 MiB of
// source) for the two parts the gateway uses, its pool and its TLS connector (21 modules): every start of
// the gateway paid for the rest (docs/performance.md, start-up). Both are taken from their own files, at
// start-up as before, so a layout another undici release changes fails the start, never a payment;
// test/proxy/undici.test.ts checks that they are the entry point's own.
const require = createRequire(import.meta.url)

/** undici's `Pool`. */
export const Pool = require('undici/lib/dispatcher/pool.js') as typeof UndiciPool

/** undici's `buildConnector`. */
export const buildConnector = require('undici/lib/core/connect.js') as typeof BuildConnector
