import t from 'tap'
import { HashQueue } from '../../lib/credentials/hash-queue.js'

t.test('runs up to its concurrency, then queues, then is full', async (t) => {
  const queue = new HashQueue(2, 3, 2)
  const first = queue.enter('')
  const second = queue.enter('')
  t.same([queue.running, queue.waiting], [2, 0], 'both started at once')
  t.notOk(queue.full(''))
  const waiting = [queue.enter('a'), queue.enter('a')]
  t.ok(queue.full('a'), 'a known address holds at most clientQueueMax places')
  t.notOk(queue.full('b'), 'another address still has room')
  t.notOk(queue.full(''), 'an unknown address meets only the whole queue')
  waiting.push(queue.enter('b'))
  t.same([queue.running, queue.waiting], [2, 3])
  t.ok(queue.full(''), 'the whole queue is taken')
  ;(await first)()
  ;(await second)()
  for (const turn of waiting) (await turn)()
  t.same([queue.running, queue.waiting], [0, 0])
  t.notOk(queue.full('a'))
})

t.test('waiting turns alternate by address: a flood from one waits behind itself', async (t) => {
  const queue = new HashQueue(1, 100, 100)
  const order: string[] = []
  const running = queue.enter('flood')
  const turns = [
    ...['flood-1', 'flood-2', 'flood-3'].map((name) => [name, queue.enter('flood')] as const),
    ['real', queue.enter('real')] as const,
  ]
  const done = turns.map(([name, turn]) =>
    turn.then((end) => {
      order.push(name)
      end()
    }),
  )
  ;(await running)()
  await Promise.all(done)
  t.same(order, ['flood-1', 'real', 'flood-2', 'flood-3'])
})

t.test('with no waiting places, a free slot still takes a check; a taken one refuses it', async (t) => {
  const queue = new HashQueue(1, 0, 0)
  t.notOk(queue.full(''), 'idle: room')
  t.notOk(queue.full('a'))
  const turn = queue.enter('a')
  t.ok(queue.full(''), 'the slot taken and no place to wait')
  ;(await turn)()
  t.notOk(queue.full('a'))
})
