import type { Server } from 'node:net'
import type { AddressInfo } from 'node:net'

/** Starts listening; a port in use or an address that cannot be bound rejects instead of crashing. */
export function listen(server: Server, port: number, host?: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve(server.address() as AddressInfo)
    })
  })
}
