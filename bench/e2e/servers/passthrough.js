// (b) The fair baseline: http-proxy-3 forwarding everything, with a bounded keep-alive pool
// (the same bound as the gateway's), and no checks at all.
import { Agent, createServer } from 'node:http'
import { createProxyServer } from 'http-proxy-3'
import { serve, target } from './child.js'

const agent = new Agent({ keepAlive: true, maxSockets: 256 })
const proxy = createProxyServer({ target: target(), agent, xfwd: true })
proxy.on('error', (_error, _req, res) => {
  res.writeHead?.(502)
  res.end()
})
await serve(createServer((req, res) => proxy.web(req, res)))
