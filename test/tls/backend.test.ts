import t from 'tap'
import { backendConnections, serverName } from '../../lib/tls/backend.js'

t.test(
  "the name checked: --target-servername, else the target's host; an address is checked as an address, without SNI",
  async (t) => {
    t.equal(serverName(new URL('https://payments.internal:8443/v1'), undefined), 'payments.internal')
    t.equal(serverName(new URL('https://10.0.0.7'), undefined), '')
    t.equal(serverName(new URL('https://[::1]:8443'), undefined), '')
    t.equal(serverName(new URL('https://10.0.0.7'), 'payments.internal'), 'payments.internal')
  },
)

t.test('an http target: no TLS for either engine', async (t) => {
  t.equal(backendConnections(new URL('http://127.0.0.1:9000'), undefined, 1000), undefined)
})
