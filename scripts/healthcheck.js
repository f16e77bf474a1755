// The image's HEALTHCHECK (Dockerfile; docs/deployment.md, the image): asks the gateway's admin listener for
// /healthz wherever `--admin` or PAYMENTS_GATE_ADMIN put it. The gateway's own command line and environment
// (PID 1 in the image; another process's id as the first argument) are read by serve's own parser, from dist/,
// so every form serve takes (`PORT`, `HOST:PORT`, `[IPv6]:PORT`, `--admin=...`, the variable) is read as serve
// read it. Node, as the image has no curl. Without an admin listener there is nothing to ask, and a running
// process is healthy. Exit 0: healthy; 1: not.
import { readFileSync } from 'node:fs'
import { parseServeOptions } from '../dist/cli/options.js'

// Not `import`: node builds an ES module's view of node:http by reading every export, and one loads node's own
// undici for nothing, on every probe of the image (scripts/bundle-cli.js does the same for dist/cli.js).
const { get } = process.getBuiltinModule('node:http')

const pid = process.argv[2] ?? '1'
/** A /proc file's NUL-terminated entries. */
const entries = (name) => readFileSync(`/proc/${pid}/${name}`, 'utf8').split('\0').slice(0, -1)
const args = entries('cmdline')
const env = Object.fromEntries(
  entries('environ').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
)
// `node [node's flags] dist/cli.js serve FLAGS`; another command (demo) has no admin listener.
const command = args.indexOf('serve')
const admin = command === -1 ? undefined : parseServeOptions(args.slice(command + 1), env).admin
if (admin === undefined) process.exit(0)
// A listener on every interface is asked on loopback.
const host = admin.host ?? '0.0.0.0'
const local = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host
const url = `http://${local.includes(':') ? `[${local}]` : local}:${admin.port}/healthz`
// node:http, not fetch: fetch refuses the Fetch standard's "bad ports" (10080, 6000, 6665 to 6669, ...), where
// serve binds an admin listener all the same.
get(url, { timeout: 2000 }, (res) => process.exit(res.statusCode === 200 ? 0 : 1))
  .on('timeout', () => process.exit(1))
  .on('error', () => process.exit(1))
