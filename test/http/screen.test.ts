import { Readable } from 'node:stream'
import t from 'tap'
import type { Principal } from '../../lib/checks/auth.js'
import { buildChecks } from '../../lib/checks/index.js'
import { screenBody } from '../../lib/http/screen.js'
import { bytes, policies, saleBody } from '../helpers/fixtures.js'

// The pure checks as `buildChecks` makes them, without a rate limiter (docs/middleware-reference.md, checks without a
// server): a body read through screenBody gets the checks' verdict as it is, nothing counted.
const shop: Principal = { username: 'shop-1', entities: new Set(['default']) }

t.test('screenBody without a rate limiter: the verdict of the checks, a refusal as a refusal', async (t) => {
  const checks = buildChecks({ policies: policies() })
  t.equal(checks.rateLimiter, undefined)
  const admitted = { ok: true, operation: 'sale', principal: shop, mode: 'enforce', refused: undefined } as const
  const passed = await screenBody(checks, Readable.from([bytes(saleBody())]), admitted)
  t.match(passed, { ok: true, operation: 'sale', entity: 'default' })
  const refused = await screenBody(checks, Readable.from([bytes({ ...saleBody(), channel: 'fax' })]), admitted)
  t.match(refused, { ok: false, status: 400, body: { errorName: 'bodyDoesNotMatchSchema' } })
})
