// Whom a failure is blamed on. A rank that fails while waiting for others
// (no progress for MYCOLL_TIMEOUT, a connection that ended) reports whom it
// waited for. Several ranks of a chain time out at about the same moment
// when one at its end stops, and the first report to arrive is a race; the
// root cause is instead found by following the waits: from the ranks this
// one waited for, to the ranks their reports say they waited for, and on,
// to a rank that reported a failure of its own (waiting for nobody) or one
// that reported nothing. Pure: the bootstrap calls it with what it has
// received, as reports arrive.
//
// A rank whose connection to a peer ended reports that peer, and apart
// (`also`) the peers of its other unfinished transfers. A rank that fails
// first shuts its links after its report, so a rank still waiting on it and
// on a stopped rank loses that connection before its own timeout: its
// report names the first rank, whose waits lead back to it, and the waits
// read as a cycle. Only where the waits come back around without a root
// are the `also` lists followed too (of this rank and of every report), so
// no live rank's other transfers are ever blamed where a root is found
// without them.
//
// A report with no waits but an `also` list was caused by those ranks (a
// GPU rank whose kernels another rank's report, or the end of a rank's
// link, stopped): the waits go on through them, unless all of them were
// reached already (they lead back), where it is a root as any report
// without waits.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/wire.h"

namespace mycoll {

struct BlameView {
  int self = -1;
  std::vector<int> waits_for;                            // whom this rank waited for
  std::vector<int> also;                                 // its other unfinished transfers' peers
  const std::vector<bswire::Report>* reports = nullptr;  // other ranks', one per origin
  const std::vector<std::string>* gone = nullptr;        // per rank: why its link ended, "" open
};

struct Blame {
  // Every rank at the end of a chain reported a failure or is gone (its
  // link ended after everything it sent), or the waits form a cycle: no
  // report still to come can change the answer.
  bool settled = false;
  std::vector<int> roots;  // the ranks at the ends of the chains; empty: a cycle
  std::string text;        // the root cause, as told to the user ("" no waits)
};

Blame find_root_cause(const BlameView& v);

}  // namespace mycoll
