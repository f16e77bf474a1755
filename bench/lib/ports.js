// A free loopback port, for a server the bench starts that must be told its port before it listens.
import { createServer } from 'node:net'

/** A port nothing listens on at 127.0.0.1 now: taken by the kernel, then released. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}
