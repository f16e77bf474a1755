// (u) The physical limit for a proxy that must read the whole body before forwarding it: a node `http`
// server that reads the body whole, forwards it as it came on one undici Pool (keep-alive, bounded like
// the gateway's), and relays the backend's status, headers and body (undici-forward.js). No checks, logs
// or metrics.
import { createServer } from 'node:http'
import { serve, target } from './child.js'
import { readWhole, undiciForwarder } from './undici-forward.js'

const forward = undiciForwarder(target())

await serve(createServer((req, res) => readWhole(req, res, (body) => forward(req, res, body))))
