import t from 'tap'
import * as undici from 'undici'
import { buildConnector, Pool } from '../../lib/proxy/undici.js'

// The two parts are taken from undici's own files to spare the start the rest of it: a release that moves
// or replaces them must fail here, not in the gateway.
t.test("undici's Pool and buildConnector, from their own files, are the entry point's own", async (t) => {
  t.equal(Pool, undici.Pool)
  t.equal(buildConnector, undici.buildConnector)
})
