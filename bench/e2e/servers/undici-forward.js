// The bare undici forwarder of (u), shared with the ladder's steps (steps.js): one Pool (keep-alive,
// bounded like the gateway's), and `forward(req, res, body)` sending `body` with the request's own headers
// and relaying the backend's status, headers and body. No checks, logs or metrics. It uses Pool.dispatch
// with undici's own handler callbacks, which hand over the raw header list and each chunk with nothing
// built in between (Pool.request, which builds a header object and a Readable for the body, used more CPU
// per request when both were measured side by side).
import { Pool } from 'undici'

// Connection-specific fields are not forwarded (RFC 9110, section 7.6.1; undici refuses some of them),
// nor Host, which undici sets from the pool's origin.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'host',
])

function forwardable(raw, length) {
  const headers = []
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase()
    if (HOP_BY_HOP.has(name)) continue
    // A re-serialized body need not be as long as the one that came.
    headers.push(raw[i], name === 'content-length' ? String(length) : raw[i + 1])
  }
  return headers
}

function fail(res) {
  if (res.headersSent) return res.destroy()
  res.writeHead(502, { 'content-length': 0 })
  res.end()
}

/** A forwarder to `origin`: `forward(req, res, body)` sends `body` (a Buffer) and relays the answer. */
export function undiciForwarder(origin) {
  const pool = new Pool(origin, { connections: 256, pipelining: 1 })
  return function forward(req, res, body) {
    pool.dispatch(
      { method: req.method, path: req.url, headers: forwardable(req.rawHeaders, body.length), body },
      {
        // undici's controller API (undici 8 has no other), as lib/proxy/payment-relay.ts uses it.
        onRequestStart() {},
        onResponseStart(controller, status, _headers, statusText) {
          const raw = controller.rawHeaders
          const headers = []
          for (let i = 0; i < raw.length; i += 2) {
            const name = raw[i].toString('latin1')
            if (!HOP_BY_HOP.has(name.toLowerCase())) headers.push(name, raw[i + 1].toString('latin1'))
          }
          res.writeHead(status, statusText || undefined, headers)
        },
        onResponseData(controller, chunk) {
          if (res.write(chunk)) return
          controller.pause()
          res.once('drain', () => controller.resume())
        },
        onResponseEnd() {
          res.end()
        },
        onResponseError() {
          fail(res)
        },
      },
    )
  }
}

/** Reads the request's body whole, then calls `then(body)`; a request that fails mid-body is dropped. */
export function readWhole(req, res, then) {
  const chunks = []
  req.on('data', (chunk) => chunks.push(chunk))
  req.on('end', () => then(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)))
  req.on('error', () => res.destroy())
}
