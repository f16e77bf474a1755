import type { AddressInfo } from 'node:net'
import { readFailure } from '../file-error.js'
import { UsageError } from './io.js'
import type { Address } from './options.js'

/** Why a port could not be bound, and what to do, by the listen error's code. */
const LISTEN_FAILURES: Readonly<Record<string, string>> = {
  EADDRINUSE: 'is in use; stop what listens there or give another port',
  EACCES: 'needs privileges (a port below 1024); give a port above 1023',
  EADDRNOTAVAIL: 'is not an address of this host; give one of its addresses, or only a port for all of them',
  ENOTFOUND: 'names a host that does not resolve; give an IP address',
}

/** A port that cannot be bound is a start-up failure: one line, exit 2, saying which flag or variable named it. */
export async function bind(where: string, address: Address, listen: () => Promise<AddressInfo>): Promise<AddressInfo> {
  try {
    return await listen()
  } catch (error) {
    const shown = address.host === undefined ? `port ${address.port}` : `${address.host}:${address.port}`
    const failure = LISTEN_FAILURES[(error as NodeJS.ErrnoException).code as string] ?? 'cannot be listened on; give another address'
    throw new UsageError(`${where}: ${shown} ${failure}`)
  }
}

/**
 * A policy folder, credentials file or store that start-up cannot read or accept, as one line: the flag or variable that
 * named it, what is wrong, and what to do. Anything else is not the user's to fix and goes on as it is.
 */
export function unreadable(error: unknown, where: (key: string) => string): unknown {
  const { code, syscall, path, message } = error as NodeJS.ErrnoException
  if (code === 'ECREDENTIALS') return new UsageError(`${where('credentials')}: ${message}; give a credentials file as docs/credentials.md describes`)
  if (code === 'EBACKENDERRORS') return new UsageError(`${where('backendErrors')}: ${message}; fix it (payments-gate check-backend-errors FILE lists every problem)`)
  if (code === 'EPOLICY') return new UsageError(`${where('policies')}: ${message}; fix it (payments-gate check-policies DIR lists every problem)`)
  // The store's own message names the flag; the value may have come from its variable.
  if (code === 'EIDEMPOTENCY') return new UsageError(message.replace('--idempotency', where('idempotency')))
  // The one file-system call start-up makes outside those two files: reading the policy folder.
  if (syscall !== undefined) return new UsageError(`${where('policies')}: ${path}: ${readFailure(error)}; give a readable folder of policy files (docs/policies.md)`)
  return error
}
