import { readFile } from 'node:fs/promises'
import t from 'tap'
import { createIdempotencyStore } from '../../lib/idempotency/create-store.js'
import type { RedisIdempotencyStore } from '../../lib/idempotency/redis.js'
import { makePki } from '../helpers/certificates.js'
import { saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, send } from '../helpers/http.js'
import { redisRuns } from '../helpers/redis.js'
import { startTlsRedisCluster } from '../helpers/redis-cluster.js'
import { ANSWER, OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * `rediss-cluster://` (docs/idempotency-reference.md, TLS to the store): a Redis Cluster that speaks only TLS and announces
 * its nodes by name, as ElastiCache's cluster mode with TLS does, with a certificate that names only that name:
 * the gateway reaches every node by its name, so each certificate is checked against it, never against an address
 * it looked up itself.
 */

const OPTIONS = { ttlMs: 600_000, inFlightMs: 600_000, oversizedAnswer: OVERSIZED, unknownAnswer: UNKNOWN }

t.test(
  'rediss-cluster://: the seed and the nodes reached by name, each certificate verified against the CA bundle',
  async (t) => {
    if (!redisRuns(t)) return
    const pki = await makePki(t.testdir())
    const named = await pki.issue('named', { names: 'DNS:localhost' })
    const port = await startTlsRedisCluster(t, named, pki.ca, 'localhost')
    const ca = await readFile(pki.ca)
    const url = `rediss-cluster://localhost:${port}`
    const store = createIdempotencyStore(url, { ...OPTIONS, ca, onError: () => {} }) as RedisIdempotencyStore
    t.teardown(() => store.close())
    t.ok(await store.ready(10_000), 'ready: its certificate names localhost, the name the seed and the node have')
    const claim = await store.claim('tls-1', 'f')
    t.equal(claim.state, 'claimed')
    if (claim.state === 'claimed') await store.record('tls-1', claim.token, ANSWER)
    t.equal((await store.claim('tls-1', 'f')).state, 'recorded')

    const other = await makePki(t.testdir())
    const errors: Error[] = []
    const untrusted = createIdempotencyStore(url, {
      ...OPTIONS,
      ca: await readFile(other.ca),
      commandTimeoutMs: 200,
      onError: (error) => errors.push(error),
    }) as RedisIdempotencyStore
    t.equal(await untrusted.ready(1000), false, 'a cluster whose certificate the CA bundle does not verify')
    await untrusted.close()
    t.ok(errors.length > 0, 'is reported')

    const { url: gateway, backend } = await startGateway(t, { idempotency: url, idempotencyCaBundle: ca })
    const payment = { ...saleBody(), transactionReference: 'tls-cluster-1' }
    t.equal((await send(gateway, { headers: paymentHeaders(), body: payment })).status, 201)
    const retry = await send(gateway, { headers: paymentHeaders(), body: payment })
    t.equal(retry.headers['idempotent-replayed'], 'true', 'the gateway: replayed from the TLS cluster')
    t.equal(backend.received.length, 1)
  },
)
