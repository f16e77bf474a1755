import t from 'tap'
import { saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, send } from '../helpers/http.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * Another spelling of a payment path is no way around the checks
 * (docs/checks.md, routes): refused as the operation would be, and a clean
 * payment on it is forwarded with its path as sent.
 */
const { url, backend } = await startGateway(t)
const spellings = [
  '/payments/sales/migrateCardOnFile/',
  '/Payments/Sales/MigrateCardOnFile',
  '//payments/sales/migrate%43ardOnFile;x=1',
]

t.test('a Luhn-failing card on another spelling is refused, nothing forwarded', async (t) => {
  const body = saleBody()
  body.instruction.paymentInstrument.cardNumber = '4444333322221112'
  for (const path of spellings) {
    const reply = await send(url, { path, headers: paymentHeaders(), body })
    t.equal(reply.status, 400, path)
    t.equal(reply.json.validationErrors?.[0]?.errorName, 'panFailedLuhnCheck', path)
  }
  t.equal(backend.received.length, 0)
})

t.test('without credentials: 401, as on the path itself', async (t) => {
  const { authorization: _, ...anonymous } = paymentHeaders()
  const reply = await send(url, { path: spellings[0], headers: anonymous, body: saleBody() })
  t.equal(reply.status, 401)
})

t.test('a clean payment on another spelling is forwarded, its path as sent', async (t) => {
  const before = backend.received.length
  const reply = await send(url, { path: spellings[0], headers: paymentHeaders(), body: saleBody() })
  t.equal(reply.status, 201)
  t.equal(backend.received.length, before + 1)
  t.equal(backend.received.at(-1)?.url, spellings[0])
})
