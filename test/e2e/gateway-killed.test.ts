import t from 'tap'
import { gatewayProcess } from '../helpers/cli.js'
import { saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, type Reply, send, until, waitFor } from '../helpers/http.js'
import { startRedis } from '../helpers/redis.js'
import { startBackend } from '../helpers/servers.js'

/**
 * A gateway killed outright (SIGKILL: an OOM kill, a node lost) after the
 * backend received its payment: the claim it left is never a free key. Once
 * its in-flight window is over, a retry on another gateway gets the unknown
 * outcome, and the backend receives the payment once (docs/idempotency-reference.md,
 * the in-flight window).
 */

function pay(url: string, body: object): Promise<Reply> {
  return send(url, { headers: paymentHeaders(), body })
}

t.test(
  'gateway A killed after the backend received the payment: a retry on gateway B gets 409, then after the window the unknown outcome; the backend receives it once',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    // The backend takes the payment and never answers: its outcome is unknown to everybody but the backend.
    const backend = await startBackend(() => undefined)
    t.teardown(() => backend.close())
    // --timeout 200: an in-flight window of 3 x 200 ms + 5 s.
    const args = ['--idempotency', redis.url, '--timeout', '200']
    const [a, b] = await Promise.all([gatewayProcess(t, backend.url, args), gatewayProcess(t, backend.url, args)])
    const payment: Record<string, any> = { ...saleBody(), transactionReference: 'killed-mid-payment' }
    const first = pay(a.url, payment).catch((error: unknown) => error)
    t.ok(await until(() => backend.started === 1), 'the backend has the payment')
    a.run.child.kill('SIGKILL')
    t.match(await first, { code: 'ECONNRESET' }, 'the client of A lost its connection')

    const fresh = await pay(b.url, payment)
    t.equal(fresh.status, 409, 'while the claim is fresh: in progress')
    let retry = fresh
    for (let attempt = 0; attempt < 100 && retry.status === 409; attempt++) {
      await waitFor(100)
      retry = await pay(b.url, payment)
    }
    t.equal(retry.status, 500, 'after the window: the unknown outcome')
    t.equal(retry.json.errorName, 'internalErrorOccurred')
    t.match(retry.json.message, /outcome of this payment is unknown/)
    t.equal(retry.headers['idempotent-replayed'], 'true')
    t.equal((await pay(b.url, payment)).status, 500, 'and again')
    const other = await pay(b.url, {
      ...payment,
      instruction: { ...payment.instruction, value: { amount: 999, currency: 'GBP' } },
    })
    t.equal(other.status, 422, 'another payment with the reference: already used')
    t.equal(backend.started, 1, 'the backend received the payment once')
  },
)
