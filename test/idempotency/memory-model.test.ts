import fc from 'fast-check'
import t from 'tap'
import { MIN_MAX_BYTES, MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import { runs } from '../helpers/fuzz.js'
import { OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'
import { runStoreModel, storeCommands, type ModelSettings, type StoreRun } from '../helpers/store-model.js'

/** Random bounds and windows, a clock that starts anywhere (past 2^31 ms too) and a claim counter about to turn. */
const STORE = fc.record({
  ttlMs: fc.integer({ min: 1, max: 3000 }),
  inFlightMs: fc.integer({ min: 1, max: 3000 }),
  maxEntries: fc.oneof(fc.integer({ min: 1, max: 6 }), fc.constant(1_000_000)),
  maxBytes: fc.integer({ min: MIN_MAX_BYTES, max: MIN_MAX_BYTES + 300_000 }),
  maxAnswerBytes: fc.constantFrom(65_536, 2_000),
  clock: fc.constantFrom(1000.5, 2 ** 31 - 700, 2 ** 32 + 0.25, 2 ** 45),
  claims: fc.constantFrom(0, 2 ** 30 - 3, 2 ** 31 - 2),
})

t.test('the memory store keeps the contract of the plain model, under random bounds, windows and clocks', async (t) => {
  let commands = 0
  await fc.assert(
    fc.asyncProperty(
      STORE.chain((store) => fc.tuple(fc.constant(store), storeCommands(store))),
      async ([options, run]) => {
        // Never more than six keys are in flight: up to six, the entry bound is the one that refuses a claim.
        const settings: ModelSettings = {
          ...options,
          oversizedAnswer: OVERSIZED,
          unknownAnswer: UNKNOWN,
          capacity: options.maxEntries,
          holdsLate: true,
        }
        let time = options.clock
        let evictions = 0
        const start = (): StoreRun => {
          const store = new MemoryIdempotencyStore({
            ...settings,
            now: () => time,
            report: { evicted: () => evictions++, full: () => {}, window: () => {} },
          })
          return {
            store,
            advance: (ms) => void (time += ms),
            evictions: () => evictions,
            check(model) {
              commands++
              if (store.size !== model.live)
                throw new Error(`the store holds ${store.size} keys, the model ${model.live}`)
              if (store.size > options.maxEntries || store.bytes > options.maxBytes)
                throw new Error(`${store.size} keys and ${store.bytes} bytes held, over the bounds`)
            },
          }
        }
        await runStoreModel(settings, start, run)
      },
    ),
    runs(0.5),
  )
  t.ok(commands > 0, `${commands} commands checked`)
})
