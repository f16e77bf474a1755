// (u) The physical limit for a proxy that must read the whole body before forwarding it: a node `http`
// server that reads the body whole, forwards it as it came on one undici Pool (keep-alive, bounded like
// the gateway's), and relays the backend's status, headers and body. No checks, logs or metrics. The
// forwarding uses Pool.dispatch with undici's own handler callbacks, which hand over the raw header list
// and each chunk with nothing built in between (Pool.request, which builds a header object and a
// Readable for the body, used more CPU per request when both were measured side by side).
import { createServer } from 'node:http'
import { Pool } from 'undici'
import { serve, target } from './child.js'

const pool = new Pool(target(), { connections: 256, pipelining: 1 })

// Connection-specific fields are not forwarded (RFC 9110, section 7.6.1; undici refuses some of them),
// nor Host, which undici sets from the pool's origin.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host'])

function forwardable(raw) {
  const headers = []
  for (let i = 0; i < raw.length; i += 2) {
    if (!HOP_BY_HOP.has(raw[i].toLowerCase())) headers.push(raw[i], raw[i + 1])
  }
  return headers
}

function fail(res) {
  if (res.headersSent) return res.destroy()
  res.writeHead(502, { 'content-length': 0 })
  res.end()
}

function forward(req, res, body) {
  pool.dispatch(
    { method: req.method, path: req.url, headers: forwardable(req.rawHeaders), body },
    {
      onConnect() {},
      onHeaders(status, raw, resume, statusText) {
        this.resume = resume
        const headers = []
        for (let i = 0; i < raw.length; i += 2) {
          const name = raw[i].toString('latin1')
          if (!HOP_BY_HOP.has(name.toLowerCase())) headers.push(name, raw[i + 1].toString('latin1'))
        }
        res.writeHead(status, statusText || undefined, headers)
        return true
      },
      onData(chunk) {
        if (res.write(chunk)) return true
        res.once('drain', this.resume)
        return false
      },
      onComplete() {
        res.end()
      },
      onError() {
        fail(res)
      },
    },
  )
}

await serve(
  createServer((req, res) => {
    const chunks = []
    req.on('data', (chunk) => chunks.push(chunk))
    req.on('end', () => forward(req, res, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)))
    req.on('error', () => res.destroy())
  }),
)
