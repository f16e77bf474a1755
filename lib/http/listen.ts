import type { Server } from 'node:net'
import type { AddressInfo } from 'node:net'

/**
 * Starts listening; a port in use or an address that cannot be bound rejects instead of crashing. Once it
 * listens, node's server emits `error` only for an `accept` that failed (out of memory or socket buffers, a
 * firewall's EPERM; node's net.Server): that one connection is lost and the listener goes on, so `onError` is
 * told, where an error with no listener would end the process and every payment in flight with it.
 */
export function listen(
  server: Server,
  port: number,
  host: string | undefined,
  onError: (error: Error) => void,
): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      server.on('error', onError)
      resolve(server.address() as AddressInfo)
    })
  })
}
