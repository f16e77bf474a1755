// The image's HEALTHCHECK (Dockerfile; docs/deployment.md, the image): asks the gateway's admin listener for
// /healthz wherever `--admin` or PAYMENTS_GATE_ADMIN put it, read from the gateway's own command line and
// environment (PID 1 in the image; another process's id as the first argument). Node, as the image has no curl.
// Without an admin listener there is nothing to ask, and a running process is healthy. Exit 0: healthy; 1: not.
import { readFileSync } from 'node:fs'

const pid = process.argv[2] ?? '1'
const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
const variables = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')

/** The last `--admin VALUE` or `--admin=VALUE`, as serve reads it; else the variable, which a flag wins over. */
function adminAddress() {
  let found
  args.forEach((arg, i) => {
    if (arg === '--admin') found = args[i + 1]
    else if (arg.startsWith('--admin=')) found = arg.slice('--admin='.length)
  })
  return (
    found ?? variables.find((line) => line.startsWith('PAYMENTS_GATE_ADMIN='))?.slice('PAYMENTS_GATE_ADMIN='.length)
  )
}

const address = adminAddress()
if (address === undefined) process.exit(0)
const colon = address.lastIndexOf(':')
const host = address.slice(0, colon).replace(/^\[(.*)\]$/, '$1')
const port = address.slice(colon + 1)
// A listener on every interface is asked on loopback.
const local = host === '' || host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host
const url = `http://${local.includes(':') ? `[${local}]` : local}:${port}/healthz`
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) })
  process.exit(res.status === 200 ? 0 : 1)
} catch {
  process.exit(1)
}
