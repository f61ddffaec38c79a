// fixpeer: a FIX 4.4 counterparty built on the C++ QuickFIX engine (Debian's libquickfix-dev),
// for the conformance tests in e2e/fix_conformance_test.go. It is test-only code: an engine that
// shares no code with QuickFIX/Go checks, from the wire, what the desk's session and the bundled
// FIX venue send — every message it receives is validated against the FIX 4.4 data dictionary,
// lengths and checksums included, and any reject either side raises fails the run.
//
//   fixpeer acceptor  -sender S -target T -dict FIX44.xml -store DIR -bid B -ask A
//     a venue: prints "LISTENING port=N", fills each MARKET NewOrderSingle at once (a buy at A, a
//     sell at B), answers OrderStatusRequest and RequestForPositions.
//   fixpeer initiator -sender S -target T -dict FIX44.xml -store DIR -host H -port P
//     a taker: logs on to the venue and waits for commands.
//
// Commands, one per line on stdin (each answers with milestone lines on stdout):
//   order SIDE QTY      (initiator) a MARKET NewOrderSingle on EURUSD  → ORDER, FILL
//   positions           (initiator) a RequestForPositions              → POSITIONS SYMBOL=NET … | none
//   order-resent SIDE QTY (initiator) the order reaches the venue only by a resend (below)
//   fill-resent         (acceptor) the next fill reaches the desk only by a resend (below)
//   lose-next           (acceptor) the next order executes but its report is never sent: only
//                       an OrderStatusRequest finds it (STATUS)
//   resend-request      asks the counterparty to resend everything from its first application
//                       message → RESENT per resent message, GAPFILL per gap fill, RESEND_OK
//   md SYMBOL N         (initiator, on a market-data session) a MarketDataRequest for SYMBOL's
//                       bid and offer (snapshot + updates, top of book, incremental) → MD_SUBSCRIBED,
//                       SNAPSHOT, an INCREMENTAL per MarketDataIncrementalRefresh until N came,
//                       then an unsubscribe (263=2) → MD_OK
//   md-unknown SYMBOL   (initiator) a MarketDataRequest the venue must refuse → MD_REJECT
//   quit                logs out → DONE
// "Only by a resend": the message is written to this side's store under the next sequence number
// but never sent, and a TestRequest follows it, so the counterparty sees a gap, asks for a
// resend (RESEND_REQUESTED) and gets the message with PossDupFlag=Y (RESEND_SERVED).
// Any failure prints "FAIL reason" and exits 1.
#include <quickfix/Application.h>
#include <quickfix/DataDictionary.h>
#include <quickfix/FileStore.h>
#include <quickfix/Session.h>
#include <quickfix/SessionSettings.h>
#include <quickfix/SocketAcceptor.h>
#include <quickfix/SocketInitiator.h>
#include <quickfix/fix44/ExecutionReport.h>
#include <quickfix/fix44/MarketDataIncrementalRefresh.h>
#include <quickfix/fix44/MarketDataRequest.h>
#include <quickfix/fix44/MarketDataRequestReject.h>
#include <quickfix/fix44/MarketDataSnapshotFullRefresh.h>
#include <quickfix/fix44/NewOrderSingle.h>
#include <quickfix/fix44/PositionReport.h>
#include <quickfix/fix44/RequestForPositions.h>
#include <quickfix/fix44/RequestForPositionsAck.h>
#include <quickfix/fix44/ResendRequest.h>
#include <quickfix/fix44/TestRequest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

namespace {

std::mutex outMu;
void say(const std::string& line) {
  std::lock_guard<std::mutex> l(outMu);
  std::cout << line << std::endl;
}
[[noreturn]] void fail(const std::string& why) {
  say("FAIL " + why);
  _exit(1);
}

// fingerprint is a message's body, groups included, as tag=value text: a resend must carry the
// original's body unchanged.
std::string fingerprint(const FIX::FieldMap& m) {
  std::ostringstream out;
  for (auto f = m.begin(); f != m.end(); ++f) out << f->getTag() << '=' << f->getString() << '|';
  for (auto g = m.g_begin(); g != m.g_end(); ++g)
    for (const FIX::FieldMap* e : g->second) out << '[' << fingerprint(*e) << ']';
  return out.str();
}

class Peer : public FIX::Application, public FIX::Log, public FIX::LogFactory {
 public:
  Peer(bool venue, const std::string& dict, double bid, double ask) : venue_(venue), dd_(dict), bid_(bid), ask_(ask) {}

  // ---- milestones the command loop waits for ----
  std::mutex mu;
  std::condition_variable cv;
  bool loggedOn = false;
  std::map<std::string, std::string> fills;  // ClOrdID → OrdStatus of its final report
  std::map<std::string, double> net;         // the venue's net per symbol (acceptor: its own book)
  std::set<std::string> heartbeats;          // TestReqIDs answered
  int positionsWanted = -1, positionsGot = 0;
  int firstAppSeq = 0;                       // the counterparty's first application message
  int resent = 0;
  int heldSeq = 0;                           // the message sent only by a resend
  bool heldServed = false;
  bool holdNextFill = false, loseNextFill = false;
  // Market data per MDReqID: snapshots and incrementals received, the venue's refusal.
  std::map<std::string, int> snapshots, incrementals;
  std::map<std::string, std::string> mdRejects;
  std::map<std::string, std::string> mdSymbol;  // MDReqID → the symbol it asked for
  FIX::SessionID sid;

  template <class P> void waitFor(const char* what, P ready) {
    std::unique_lock<std::mutex> l(mu);
    if (!cv.wait_for(l, std::chrono::seconds(20), ready)) fail(std::string("timed out waiting for ") + what);
  }
  void notify() { cv.notify_all(); }

  // ---- FIX::Application ----
  void onCreate(const FIX::SessionID& id) override { sid = id; }
  void onLogon(const FIX::SessionID&) override {
    { std::lock_guard<std::mutex> l(mu); loggedOn = true; }
    say("LOGON");
    notify();
  }
  void onLogout(const FIX::SessionID&) override {
    std::lock_guard<std::mutex> l(mu);
    loggedOn = false;
  }
  void toAdmin(FIX::Message&, const FIX::SessionID&) override {}
  void toApp(FIX::Message&, const FIX::SessionID&) throw(FIX::DoNotSend) override {}
  void fromAdmin(const FIX::Message& m, const FIX::SessionID&)
      throw(FIX::FieldNotFound, FIX::IncorrectDataFormat, FIX::IncorrectTagValue, FIX::RejectLogon) override {
    const std::string type = m.getHeader().getField(FIX::FIELD::MsgType);
    if (type == "3") fail("the counterparty rejected message " + m.getField(FIX::FIELD::RefSeqNum) + ": " + text(m));
    if (type == "2") {
      say("RESEND_REQUESTED begin=" + m.getField(FIX::FIELD::BeginSeqNo) + " end=" + m.getField(FIX::FIELD::EndSeqNo));
    }
    if (type == "0" && m.isSetField(FIX::FIELD::TestReqID)) {
      std::lock_guard<std::mutex> l(mu);
      heartbeats.insert(m.getField(FIX::FIELD::TestReqID));
    }
    notify();
  }
  void fromApp(const FIX::Message& m, const FIX::SessionID&)
      throw(FIX::FieldNotFound, FIX::IncorrectDataFormat, FIX::IncorrectTagValue, FIX::UnsupportedMessageType) override {
    const std::string type = m.getHeader().getField(FIX::FIELD::MsgType);
    {
      std::lock_guard<std::mutex> l(mu);
      if (!firstAppSeq) firstAppSeq = std::stoi(m.getHeader().getField(FIX::FIELD::MsgSeqNum));
    }
    if (type == "j") fail("the counterparty refused a message: " + text(m));
    if (venue_ && type == "D") {
      fill(m);
    } else if (venue_ && type == "H") {
      status(m);
    } else if (venue_ && type == "AN") {
      positions(m);
    } else if (!venue_ && type == "8") {
      report(m);
    } else if (!venue_ && type == "W") {
      snapshot(m);
    } else if (!venue_ && type == "X") {
      incremental(m);
    } else if (!venue_ && type == "Y") {
      const std::string id = m.getField(FIX::FIELD::MDReqID);
      const std::string reason = m.isSetField(FIX::FIELD::MDReqRejReason) ? m.getField(FIX::FIELD::MDReqRejReason) : "none";
      say("MD_REJECT reqId=" + id + " reason=" + reason + " text=" + quoted(text(m)));
      std::lock_guard<std::mutex> l(mu);
      mdRejects[id] = reason;
    } else if (!venue_ && type == "AO") {
      std::lock_guard<std::mutex> l(mu);
      positionsWanted = std::stoi(m.getField(FIX::FIELD::TotalNumPosReports));
    } else if (!venue_ && type == "AP") {
      FIX44::PositionReport::NoPositions g;
      m.getGroup(1, g);
      std::lock_guard<std::mutex> l(mu);
      net[m.getField(FIX::FIELD::Symbol)] = std::stod(g.getField(FIX::FIELD::LongQty)) - std::stod(g.getField(FIX::FIELD::ShortQty));
      positionsGot++;
    } else {
      throw FIX::UnsupportedMessageType();
    }
    notify();
  }

  // ---- the venue (acceptor) ----
  void fill(const FIX::Message& order) {
    const std::string id = order.getField(FIX::FIELD::ClOrdID), side = order.getField(FIX::FIELD::Side);
    const std::string symbol = order.getField(FIX::FIELD::Symbol), qty = order.getField(FIX::FIELD::OrderQty);
    if (order.getField(FIX::FIELD::OrdType) != "1") fail("order " + id + " is not MARKET");
    if (book_.count(id)) return status(order);  // a duplicate executes nothing
    say("ORDER clOrdId=" + id + " side=" + side + " qty=" + qty + " symbol=" + symbol);
    double px = side == "1" ? ask_ : bid_, q = std::stod(qty);
    FIX44::ExecutionReport r = executionReport(id, side, symbol, q, px, "F");
    bool hold, lose;
    {
      std::lock_guard<std::mutex> l(mu);
      net[symbol] += side == "1" ? q : -q;
      fills[id] = "2";
      book_[id] = r;
      hold = holdNextFill;
      lose = loseNextFill;
      holdNextFill = loseNextFill = false;
    }
    if (hold) {
      sendOnlyByResend(r);
    } else if (!lose) {
      FIX::Session::sendToTarget(r, sid);
    }
    say("FILL clOrdId=" + id + " px=" + FIX::DoubleConvertor::convert(px) + " qty=" + qty + (hold ? " via=resend" : lose ? " via=none" : ""));
  }
  FIX44::ExecutionReport executionReport(const std::string& id, const std::string& side, const std::string& symbol, double qty,
                                         double px, const std::string& execType) {
    static int n = 0;
    FIX44::ExecutionReport r(FIX::OrderID("P-" + id), FIX::ExecID("PX-" + std::to_string(++n)), FIX::ExecType(execType[0]),
                             FIX::OrdStatus('2'), FIX::Side(side[0]), FIX::LeavesQty(0), FIX::CumQty(qty), FIX::AvgPx(px));
    r.set(FIX::ClOrdID(id));
    r.set(FIX::Symbol(symbol));
    r.set(FIX::OrderQty(qty));
    r.set(FIX::OrdType('1'));
    r.set(FIX::LastQty(qty));
    r.set(FIX::LastPx(px));
    r.set(FIX::TransactTime(3));
    return r;
  }
  // status answers an OrderStatusRequest: the order's fill again as a status report, or
  // OrdRejReason=5 (unknown order).
  void status(const FIX::Message& req) {
    const std::string id = req.getField(FIX::FIELD::ClOrdID);
    FIX44::ExecutionReport r;
    std::unique_lock<std::mutex> l(mu);
    if (book_.count(id)) {
      FIX44::ExecutionReport& f = book_[id];
      r = executionReport(id, f.getField(FIX::FIELD::Side), f.getField(FIX::FIELD::Symbol), std::stod(f.getField(FIX::FIELD::CumQty)),
                          std::stod(f.getField(FIX::FIELD::AvgPx)), "I");
    } else {
      r = FIX44::ExecutionReport(FIX::OrderID("NONE"), FIX::ExecID("PS-" + id), FIX::ExecType('I'), FIX::OrdStatus('8'),
                                 FIX::Side(req.getField(FIX::FIELD::Side)[0]), FIX::LeavesQty(0), FIX::CumQty(0), FIX::AvgPx(0));
      r.set(FIX::ClOrdID(id));
      r.set(FIX::OrdRejReason(5));
    }
    l.unlock();
    FIX::Session::sendToTarget(r, sid);
    say("STATUS clOrdId=" + id + " ordStatus=" + r.getField(FIX::FIELD::OrdStatus));
  }
  void positions(const FIX::Message& req) {
    const std::string reqID = req.getField(FIX::FIELD::PosReqID), account = req.getField(FIX::FIELD::Account);
    std::map<std::string, double> open;
    {
      std::lock_guard<std::mutex> l(mu);
      for (const auto& p : net)
        if (p.second != 0) open.insert(p);
    }
    FIX44::RequestForPositionsAck ack(FIX::PosMaintRptID(reqID + "-ack"), FIX::PosReqResult(open.empty() ? 2 : 0),
                                      FIX::PosReqStatus(0), FIX::Account(account), FIX::AccountType(1));
    ack.set(FIX::PosReqID(reqID));
    ack.set(FIX::TotalNumPosReports(open.size()));
    FIX::Session::sendToTarget(ack, sid);
    int i = 0;
    for (const auto& p : open) {
      FIX44::PositionReport r(FIX::PosMaintRptID(reqID + "-" + std::to_string(++i)), FIX::PosReqResult(0),
                              FIX::ClearingBusinessDate(req.getField(FIX::FIELD::ClearingBusinessDate)), FIX::Account(account),
                              FIX::AccountType(1), FIX::SettlPrice(ask_), FIX::SettlPriceType(1), FIX::PriorSettlPrice(ask_));
      r.set(FIX::PosReqID(reqID));
      r.set(FIX::Symbol(p.first));
      FIX44::PositionReport::NoPositions g;
      g.set(FIX::PosType("TQ"));
      g.set(FIX::LongQty(p.second > 0 ? p.second : 0));
      g.set(FIX::ShortQty(p.second < 0 ? -p.second : 0));
      r.addGroup(g);
      FIX::Session::sendToTarget(r, sid);
    }
  }

  // ---- the taker (initiator) ----
  void report(const FIX::Message& r) {
    const std::string id = r.getField(FIX::FIELD::ClOrdID), st = r.getField(FIX::FIELD::OrdStatus);
    if (st == "8") fail("order " + id + " rejected: " + text(r));
    if (st != "2") return;
    say("FILL clOrdId=" + id + " px=" + r.getField(FIX::FIELD::AvgPx) + " qty=" + r.getField(FIX::FIELD::CumQty) +
        " execType=" + r.getField(FIX::FIELD::ExecType));
    std::lock_guard<std::mutex> l(mu);
    fills[id] = st;
  }

  // ---- market data (initiator on a market-data session) ----
  // snapshot checks a MarketDataSnapshotFullRefresh: the symbol asked for, one bid and one offer,
  // priced, not crossed.
  void snapshot(const FIX::Message& m) {
    const std::string id = m.getField(FIX::FIELD::MDReqID), symbol = m.getField(FIX::FIELD::Symbol);
    std::string want;
    {
      std::lock_guard<std::mutex> l(mu);
      want = mdSymbol.count(id) ? mdSymbol[id] : "";
    }
    if (want.empty()) fail("snapshot for MDReqID " + id + ", which was never asked for");
    if (symbol != want) fail("snapshot " + id + " is of " + symbol + ", asked for " + want);
    double bid = 0, ask = 0;
    int n = std::stoi(m.getField(FIX::FIELD::NoMDEntries));
    for (int i = 1; i <= n; i++) {
      FIX44::MarketDataSnapshotFullRefresh::NoMDEntries g;
      m.getGroup(i, g);
      const std::string t = g.getField(FIX::FIELD::MDEntryType);
      double px = std::stod(g.getField(FIX::FIELD::MDEntryPx));
      if (t == "0") bid = px; else if (t == "1") ask = px; else fail("snapshot " + id + " has MDEntryType " + t);
    }
    if (!(bid > 0) || !(ask >= bid)) fail("snapshot " + id + " of " + symbol + " has bid " + std::to_string(bid) + " ask " + std::to_string(ask));
    say("SNAPSHOT reqId=" + id + " symbol=" + symbol + " bid=" + FIX::DoubleConvertor::convert(bid) + " ask=" + FIX::DoubleConvertor::convert(ask));
    std::lock_guard<std::mutex> l(mu);
    snapshots[id]++;
  }
  // incremental checks a MarketDataIncrementalRefresh: after the snapshot, each entry a new, changed
  // or deleted bid or offer of the symbol asked for, priced unless deleted.
  void incremental(const FIX::Message& m) {
    const std::string id = m.getField(FIX::FIELD::MDReqID);
    std::string want;
    {
      std::lock_guard<std::mutex> l(mu);
      want = mdSymbol.count(id) ? mdSymbol[id] : "";
      if (!snapshots[id]) fail("incremental " + id + " before its snapshot");
    }
    if (want.empty()) fail("incremental for MDReqID " + id + ", which was never asked for");
    int n = std::stoi(m.getField(FIX::FIELD::NoMDEntries));
    std::string entries;
    for (int i = 1; i <= n; i++) {
      FIX44::MarketDataIncrementalRefresh::NoMDEntries g;
      m.getGroup(i, g);
      const std::string action = g.getField(FIX::FIELD::MDUpdateAction), t = g.getField(FIX::FIELD::MDEntryType);
      const std::string symbol = g.getField(FIX::FIELD::Symbol);
      if (symbol != want) fail("incremental " + id + " has an entry of " + symbol + ", asked for " + want);
      if (t != "0" && t != "1") fail("incremental " + id + " has MDEntryType " + t);
      if (action != "0" && action != "1" && action != "2") fail("incremental " + id + " has MDUpdateAction " + action);
      if (action != "2" && !(std::stod(g.getField(FIX::FIELD::MDEntryPx)) > 0)) fail("incremental " + id + " has an entry without a price");
      entries += " " + std::string(t == "0" ? "bid" : "offer") + "=" + (action == "2" ? "deleted" : g.getField(FIX::FIELD::MDEntryPx));
    }
    if (n == 0) fail("incremental " + id + " has no entries");
    say("INCREMENTAL reqId=" + id + entries);
    std::lock_guard<std::mutex> l(mu);
    incrementals[id]++;
  }
  static std::string quoted(std::string s) {
    for (char& c : s)
      if (c == ' ') c = '_';
    return s;
  }

  // sendOnlyByResend writes m to the store under the next sequence number without sending it, then
  // sends a TestRequest: the counterparty sees the gap and asks for m. The venue runs it on the
  // session's thread (in fromApp), so none of its answers takes the number in between.
  void sendOnlyByResend(FIX::Message& m) {
    FIX::Session* s = FIX::Session::lookupSession(sid);
    int seq = s->getExpectedSenderNum();
    FIX::Header& h = m.getHeader();
    h.setField(FIX::BeginString(sid.getBeginString()));
    h.setField(FIX::SenderCompID(sid.getSenderCompID()));
    h.setField(FIX::TargetCompID(sid.getTargetCompID()));
    h.setField(FIX::MsgSeqNum(seq));
    h.setField(FIX::SendingTime(3));
    // The session exposes its store read-only; writing a message it then resends is this test's
    // whole point.
    const_cast<FIX::MessageStore*>(s->getStore())->set(seq, m.toString());
    s->setNextSenderMsgSeqNum(seq + 1);
    {
      std::lock_guard<std::mutex> l(mu);
      heldSeq = seq;
      heldServed = false;
    }
    FIX44::TestRequest gap(FIX::TestReqID("gap-" + std::to_string(seq)));
    FIX::Session::sendToTarget(gap, sid);
  }

  // ---- FIX::Log: every message on the wire, before the engine acts on it ----
  void clear() override {}
  void backup() override {}
  void onIncoming(const std::string& raw) override {
    FIX::Message m;
    try {
      m.setString(raw, true, &dd_);
    } catch (std::exception& e) {
      fail(std::string("unparseable message from the counterparty (") + e.what() + "): " + printable(raw));
    }
    const FIX::Header& h = m.getHeader();
    const std::string type = h.getField(FIX::FIELD::MsgType);
    int seq = std::stoi(h.getField(FIX::FIELD::MsgSeqNum));
    bool dup = h.isSetField(FIX::FIELD::PossDupFlag) && h.getField(FIX::FIELD::PossDupFlag) == "Y";
    if (type == "4" && m.isSetField(FIX::FIELD::GapFillFlag) && m.getField(FIX::FIELD::GapFillFlag) == "Y")
      say("GAPFILL seq=" + std::to_string(seq) + " new=" + m.getField(FIX::FIELD::NewSeqNo));
    if (FIX::Message::isAdminMsgType(type)) return;
    std::lock_guard<std::mutex> l(mu);
    if (!dup) {
      original_[seq] = fingerprint(m);
      return;
    }
    if (!h.isSetField(FIX::FIELD::OrigSendingTime)) fail("resent message " + std::to_string(seq) + " has no OrigSendingTime");
    if (original_.count(seq) && original_[seq] != fingerprint(m)) fail("resent message " + std::to_string(seq) + " differs from the original");
    resent++;
    say("RESENT seq=" + std::to_string(seq) + " type=" + type + (m.isSetField(FIX::FIELD::ClOrdID) ? " clOrdId=" + m.getField(FIX::FIELD::ClOrdID) : ""));
  }
  void onOutgoing(const std::string& raw) override {
    // The engine's own output, read as text: the resend of the held message.
    std::lock_guard<std::mutex> l(mu);
    if (heldSeq && raw.find("\00143=Y\001") != std::string::npos &&
        raw.find("\00134=" + std::to_string(heldSeq) + "\001") != std::string::npos) {
      heldServed = true;
      notify();
    }
  }
  void onEvent(const std::string& e) override {
    // The engine's own verdicts on what it received: a message it rejected or could not read.
    if (e.find("Rejected") != std::string::npos || e.find("Invalid message") != std::string::npos ||
        e.find("too low") != std::string::npos)
      fail("engine: " + e);
  }
  FIX::Log* create() override { return this; }
  FIX::Log* create(const FIX::SessionID&) override { return this; }
  void destroy(FIX::Log*) override {}

 private:
  static std::string text(const FIX::Message& m) { return m.isSetField(FIX::FIELD::Text) ? m.getField(FIX::FIELD::Text) : "(no Text)"; }
  static std::string printable(std::string s) {
    for (char& c : s)
      if (c == '\001') c = '|';
    return s;
  }
  bool venue_;
  FIX::DataDictionary dd_;
  double bid_, ask_;
  std::map<int, std::string> original_;
  std::map<std::string, FIX44::ExecutionReport> book_;  // the venue's fills by ClOrdID
};

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  if (bind(fd, (sockaddr*)&a, sizeof a) != 0 || getsockname(fd, (sockaddr*)&a, &n) != 0) fail("no free port");
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) fail("usage: fixpeer acceptor|initiator -flag value …");
  const std::string mode = argv[1];
  std::map<std::string, std::string> arg;
  for (int i = 2; i + 1 < argc; i += 2) arg[argv[i]] = argv[i + 1];
  const bool venue = mode == "acceptor";
  if (!venue && mode != "initiator") fail("mode must be acceptor or initiator");

  std::ostringstream cfg;
  cfg << "[DEFAULT]\nConnectionType=" << mode << "\nStartTime=00:00:00\nEndTime=00:00:00\nHeartBtInt=30\nReconnectInterval=1\n"
      << "FileStorePath=" << arg["-store"] << "\nDataDictionary=" << arg["-dict"] << "\n";
  int port = 0;
  if (venue) {
    port = freePort();
    cfg << "SocketAcceptHost=127.0.0.1\nSocketAcceptPort=" << port << "\nSocketReuseAddress=Y\n";
  } else {
    cfg << "SocketConnectHost=" << arg["-host"] << "\nSocketConnectPort=" << arg["-port"] << "\n";
  }
  cfg << "\n[SESSION]\nBeginString=FIX.4.4\nSenderCompID=" << arg["-sender"] << "\nTargetCompID=" << arg["-target"] << "\n";
  std::istringstream in(cfg.str());
  FIX::SessionSettings settings(in);
  Peer peer(venue, arg["-dict"], venue ? std::stod(arg["-bid"]) : 0, venue ? std::stod(arg["-ask"]) : 0);
  FIX::FileStoreFactory store(settings);
  std::unique_ptr<FIX::Initiator> initiator;
  std::unique_ptr<FIX::Acceptor> acceptor;
  if (venue) {
    acceptor.reset(new FIX::SocketAcceptor(peer, store, settings, peer));
    acceptor->start();
    say("LISTENING port=" + std::to_string(port));
  } else {
    initiator.reset(new FIX::SocketInitiator(peer, store, settings, peer));
    initiator->start();
  }

  int orders = 0, probes = 0;
  auto probe = [&](const std::string& id) {  // a TestRequest; its Heartbeat comes after everything sent before it
    FIX44::TestRequest t{FIX::TestReqID(id)};
    FIX::Session::sendToTarget(t, peer.sid);
    peer.waitFor(id.c_str(), [&] { return peer.heartbeats.count(id) > 0; });
  };
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream cmd(line);
    std::string what, side, qty;
    cmd >> what >> side >> qty;
    if (what == "quit") break;
    peer.waitFor("logon", [&] { return peer.loggedOn; });
    if (what == "order" || what == "order-resent") {
      std::string id = "CONF-" + std::to_string(++orders);
      FIX44::NewOrderSingle o(FIX::ClOrdID(id), FIX::Side(side[0]), FIX::TransactTime(3), FIX::OrdType('1'));
      o.set(FIX::Account("CONFORMANCE"));
      o.set(FIX::Symbol("EURUSD"));
      o.set(FIX::OrderQty(std::stod(qty)));
      o.set(FIX::TimeInForce('3'));
      say("ORDER clOrdId=" + id + " side=" + side + " qty=" + qty);
      if (what == "order") {
        FIX::Session::sendToTarget(o, peer.sid);
      } else {
        // From this thread: a taker's session thread sends nothing unasked meanwhile (the venue
        // is idle and heartbeats are 30 s apart).
        peer.sendOnlyByResend(o);
      }
      peer.waitFor("the fill", [&] { return peer.fills.count(id) > 0; });
    } else if (what == "md" || what == "md-unknown") {
      // side is the symbol here, qty the incrementals to wait for.
      const std::string id = "CONF-MD-" + std::to_string(++probes), symbol = side;
      const int want = what == "md" ? std::stoi(qty) : 0;
      {
        std::lock_guard<std::mutex> l(peer.mu);
        peer.mdSymbol[id] = symbol;
      }
      auto request = [&](char subType) {
        FIX44::MarketDataRequest r(FIX::MDReqID(id), FIX::SubscriptionRequestType(subType), FIX::MarketDepth(1));
        r.set(FIX::MDUpdateType(1));
        FIX44::MarketDataRequest::NoMDEntryTypes types;
        types.set(FIX::MDEntryType('0'));
        r.addGroup(types);
        types.set(FIX::MDEntryType('1'));
        r.addGroup(types);
        FIX44::MarketDataRequest::NoRelatedSym sym;
        sym.set(FIX::Symbol(symbol));
        r.addGroup(sym);
        FIX::Session::sendToTarget(r, peer.sid);
      };
      request('1');
      if (what == "md-unknown") {
        peer.waitFor("the market data request's refusal", [&] { return peer.mdRejects.count(id) > 0; });
        continue;
      }
      say("MD_SUBSCRIBED reqId=" + id + " symbol=" + symbol);
      peer.waitFor("the snapshot and the incrementals", [&] {
        if (peer.mdRejects.count(id)) fail("the venue refused " + id);
        return peer.snapshots[id] > 0 && peer.incrementals[id] >= want;
      });
      request('2');
      probe("md-" + std::to_string(++probes));  // the unsubscribe was read: no reject came before the Heartbeat
      std::lock_guard<std::mutex> l(peer.mu);
      say("MD_OK reqId=" + id + " snapshots=" + std::to_string(peer.snapshots[id]) + " incrementals=" + std::to_string(peer.incrementals[id]));
      continue;
    } else if (what == "positions") {
      {
        std::lock_guard<std::mutex> l(peer.mu);
        peer.net.clear();
        peer.positionsWanted = -1;
        peer.positionsGot = 0;
      }
      FIX44::RequestForPositions r(FIX::PosReqID("CONF-POS-" + std::to_string(++probes)), FIX::PosReqType(0), FIX::Account("CONFORMANCE"), FIX::AccountType(1),
                                   FIX::ClearingBusinessDate("20260101"), FIX::TransactTime(3));
      FIX::Session::sendToTarget(r, peer.sid);
      peer.waitFor("the position reports", [&] { return peer.positionsWanted >= 0 && peer.positionsGot >= peer.positionsWanted; });
      std::string out = "POSITIONS";
      for (const auto& p : peer.net) out += " " + p.first + "=" + FIX::DoubleConvertor::convert(p.second);
      say(peer.net.empty() ? out + " none" : out);
    } else if (what == "fill-resent") {
      {
        std::lock_guard<std::mutex> l(peer.mu);
        peer.holdNextFill = true;
      }
      say("ARMED");
      peer.waitFor("the held fill's resend", [&] { return peer.heldSeq && peer.heldServed; });
    } else if (what == "lose-next") {
      std::lock_guard<std::mutex> l(peer.mu);
      peer.loseNextFill = true;
      say("ARMED");
      continue;
    } else if (what == "resend-request") {
      int from;
      {
        std::lock_guard<std::mutex> l(peer.mu);
        from = peer.firstAppSeq;
        peer.resent = 0;
      }
      if (!from) fail("no application message to ask a resend of");
      FIX44::ResendRequest r(FIX::BeginSeqNo(from), FIX::EndSeqNo(0));
      FIX::Session::sendToTarget(r, peer.sid);
      probe("after-resend-" + std::to_string(++probes));
      std::lock_guard<std::mutex> l(peer.mu);
      if (peer.resent == 0) fail("the counterparty resent no application message");
      say("RESEND_OK resent=" + std::to_string(peer.resent));
      continue;
    } else {
      fail("unknown command " + line);
    }
    if (what == "order-resent" || what == "fill-resent") {
      peer.waitFor("the resend served", [&] { return peer.heldServed; });
      probe("served-" + std::to_string(++probes));
      say("RESEND_SERVED seq=" + std::to_string(peer.heldSeq));
    }
  }
  if (venue) acceptor->stop(); else initiator->stop();
  say("DONE");
  return 0;
}
