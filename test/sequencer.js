/**
 * The longest suites first: the schemathesis run takes minutes on its own, so started first it
 * runs beside the others instead of after them (on a clean clone Jest has no timings yet and
 * would start it late, by file size). The rest keep Jest's own order (failed first, then slowest
 * by its cache, then largest).
 */
const Sequencer = require('@jest/test-sequencer').default;

const FIRST = ['fuzz.test.ts'];

class LongestFirst extends Sequencer {
  sort(tests) {
    const rank = (t) => {
      const i = FIRST.findIndex((name) => t.path.endsWith(`/${name}`));
      return i === -1 ? FIRST.length : i;
    };
    const ordered = super.sort(tests);
    return [...ordered].sort((a, b) => rank(a) - rank(b));
  }
}
module.exports = LongestFirst;
