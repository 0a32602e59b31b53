// http_server.cpp - `bertx serve`'s HTTP front with Boost.Beast (http_server.hpp): sessions, routing, auth,
// request logs and the graceful stop. One io thread runs every socket; forward passes run on the batcher threads,
// which post each finished response back to the io thread.
#include "serve/http_server.hpp"

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <list>
#include <map>
#include <optional>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "bertx/version.hpp"

namespace bertx::serve {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using Response = http::response<http::string_body>;

// One request's answer and what its log line and the metrics need.
struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::string model;                     // the model it was for ("" for others)
  bool inference = false;                // counts in the model's success/failure metrics
  JobResult job;                         // inference: queue and compute times
  bool retry_after = false;              // 503: queue full
  bool unauthorized = false;             // 401: WWW-Authenticate
  bool close = false;                    // close the connection after it (a malformed or oversized request)
  std::optional<std::size_t> json_size;  // binary outputs: the Inference-Header-Content-Length to send
};

Reply text_reply(int status, std::string body) {
  Reply r;
  r.status = status, r.body = std::move(body);
  return r;
}
Reply json_reply(int status, const json& body) { return text_reply(status, body.dump()); }
Reply error_reply(int status, const std::string& message) { return text_reply(status, error_json(message)); }

// GET /v2/models/NAME: inputs (INT32 accepted too) and the head's outputs.
json model_metadata(const ServedModel& m) {
  json inputs = json::array(), outputs = json::array();
  for (const char* n : {"input_ids", "attention_mask", "token_type_ids"})
    inputs.push_back({{"name", n}, {"datatype", "INT64"}, {"shape", json::array({-1, -1})}});
  for (const auto& o : m.limits.outputs)
    outputs.push_back({{"name", o},
                       {"datatype", "FP32"},
                       {"shape", json::array({-1, m.task == "squad" ? std::int64_t{-1} : m.num_labels})}});
  return {{"name", m.name},     {"versions", json::array({"1"})},  {"platform", "bertx_libtorch"}, {"inputs", inputs},
          {"outputs", outputs}, {"parameters", {{"task", m.task}}}};
}

struct Model {
  Served served;
  std::shared_ptr<ModelMetrics> metrics = std::make_shared<ModelMetrics>();
  std::unique_ptr<Batcher> batcher;
};

class Server;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server& server) : stream_(std::move(socket)), server_(server) {}
  void start() { read(); }
  bool busy() const { return busy_; }
  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }
  // Called on the io thread with the answer to the request being handled.
  void finish(Reply reply);

 private:
  void read();
  void on_read(beast::error_code ec);
  void on_write(beast::error_code ec, bool keep_alive, bool discard);
  void discard();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  std::shared_ptr<Response> response_;
  Clock::time_point received_;
  Server& server_;
  bool busy_ = false;
  char sink_[4096];
};

class Server {
 public:
  Server(std::vector<Served> models, const ServerOptions& options) : options_(options), acceptor_(io_) {
    for (auto& s : models) {
      const std::string name = s.model.name;
      auto m = std::make_unique<Model>();
      m->served = std::move(s);
      m->batcher = std::make_unique<Batcher>(m->served.model.runner, options.batching, m->metrics);
      metrics_[name] = m->metrics;
      models_[name] = std::move(m);
    }
  }

  tcp::endpoint listen() {
    beast::error_code ec;
    const auto address = net::ip::make_address(options_.host, ec);
    if (ec) throw Error("bertx serve: --host '" + options_.host + "' is not an IP address");
    const tcp::endpoint at(address, static_cast<unsigned short>(options_.port));
    acceptor_.open(at.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(at, ec);
    if (ec)
      throw Error("bertx serve: cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " +
                  ec.message());
    acceptor_.listen(net::socket_base::max_listen_connections);
    return acceptor_.local_endpoint();
  }

  void run() {
    net::signal_set signals(io_, SIGTERM, SIGINT);
    signals.async_wait([this](beast::error_code ec, int) {
      if (!ec) stop();
    });
    accept();
    io_.run();
    for (auto& [name, m] : models_) m->batcher->stop();
  }

  void handle(const std::shared_ptr<Session>& session, const http::request<http::string_body>& req);
  void log(const http::request<http::string_body>& req, const Reply& reply, Clock::time_point received);
  void finished(const Reply& reply, Clock::time_point received);
  bool stopping() const { return stopping_; }
  net::io_context& io() { return io_; }
  const ServerOptions& options() const { return options_; }

 private:
  void accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (stopping_ || ec == net::error::operation_aborted) return;
      if (!ec) {  // an error (e.g. out of descriptors) drops that connection only
        auto s = std::make_shared<Session>(std::move(socket), *this);
        sessions_.remove_if([](const std::weak_ptr<Session>& w) { return w.expired(); });
        sessions_.push_back(s);
        s->start();
      }
      accept();
    });
  }

  // Stop accepting; close idle connections now and busy ones once answered; return when nothing is in flight.
  void stop() {
    stopping_ = true;
    beast::error_code ec;
    acceptor_.close(ec);
    drain_ = std::make_unique<net::steady_timer>(io_);
    poll_drain();
  }
  void poll_drain() {
    for (auto& w : sessions_)
      if (auto s = w.lock(); s && !s->busy()) s->close();
    if (in_flight_ == 0) return;  // nothing left: io_.run() returns once the sockets are closed
    drain_->expires_after(std::chrono::milliseconds(5));
    drain_->async_wait([this](beast::error_code) { poll_drain(); });
  }

  Reply route(const std::shared_ptr<Session>& session, const http::request<http::string_body>& req, bool& pending);
  // Which outputs a v2 response carries and which of them as binary data.
  struct OutputChoice {
    std::vector<RequestedOutput> named;  // empty: every output of the model
    bool binary_default = false;         // for every output when none is named
  };
  Reply infer(const std::shared_ptr<Session>& session, Model& m,
              const std::function<std::string(const std::vector<OutputTensor>&)>& answer, Sequences sequences,
              std::string id, OutputChoice outputs, bool& pending);
  Model* find(const std::string& name, Reply& reply);

  ServerOptions options_;
  net::io_context io_{1};
  tcp::acceptor acceptor_;
  std::map<std::string, std::unique_ptr<Model>> models_;
  std::map<std::string, std::shared_ptr<ModelMetrics>> metrics_;
  std::list<std::weak_ptr<Session>> sessions_;
  std::unique_ptr<net::steady_timer> drain_;
  std::atomic<int> in_flight_{0};
  bool stopping_ = false;

  friend class Session;
};

void Session::read() {
  parser_.emplace();
  parser_->body_limit(server_.options().body_limit);
  stream_.expires_after(std::chrono::seconds(60));
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
}

void Session::on_read(beast::error_code ec) {
  if (ec == http::error::end_of_stream || ec == net::error::operation_aborted || ec == beast::error::timeout ||
      ec == net::error::eof || ec == net::error::connection_reset || ec == net::error::bad_descriptor)
    return close();
  busy_ = true;
  received_ = Clock::now();
  if (ec) {  // not HTTP, or too large: answer and close
    request_ = {};
    Reply r =
        ec == http::error::body_limit
            ? error_reply(413, "request body over the " + std::to_string(server_.options().body_limit) + "-byte limit")
            : error_reply(400, "malformed HTTP request: " + ec.message());
    r.close = true;
    return finish(std::move(r));
  }
  request_ = parser_->release();
  server_.handle(shared_from_this(), request_);
}

void Session::finish(Reply reply) {
  server_.log(request_, reply, received_);
  server_.finished(reply, received_);
  response_ =
      std::make_shared<Response>(static_cast<http::status>(reply.status), request_.version() ? request_.version() : 11);
  response_->set(http::field::server, "bertx/" BERTX_VERSION_STRING);
  response_->set(http::field::content_type, reply.json_size ? "application/octet-stream" : reply.content_type);
  if (reply.json_size) response_->set("Inference-Header-Content-Length", std::to_string(*reply.json_size));
  if (reply.retry_after) response_->set(http::field::retry_after, "1");
  if (reply.unauthorized) response_->set(http::field::www_authenticate, "Bearer");
  const bool keep_alive = !reply.close && request_.keep_alive() && !server_.stopping();
  response_->keep_alive(keep_alive);
  response_->body() = std::move(reply.body);
  response_->prepare_payload();
  http::async_write(stream_, *response_,
                    [self = shared_from_this(), keep_alive, drain = reply.close](beast::error_code ec, std::size_t) {
                      self->on_write(ec, keep_alive, drain);
                    });
}

void Session::on_write(beast::error_code ec, bool keep_alive, bool drain) {
  busy_ = false;
  if (!ec && drain) {  // half-close, then read what the client still sends: closing now would reset the answer
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(5));
    return discard();
  }
  if (ec || !keep_alive || server_.stopping()) return close();
  read();
}

void Session::discard() {
  stream_.async_read_some(net::buffer(sink_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (ec) return self->close();
    self->discard();
  });
}

Model* Server::find(const std::string& name, Reply& reply) {
  auto it = models_.find(name);
  if (it != models_.end()) return it->second.get();
  std::string names;
  for (const auto& [n, m] : models_) names += (names.empty() ? "" : ", ") + n;
  reply = error_reply(404, "unknown model '" + name.substr(0, 64) + "'; serving " + names);
  return nullptr;
}

// Splits "/a/b/c" into {"a", "b", "c"} (the query string dropped).
std::vector<std::string> segments(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < target.size();) {
    const std::size_t j = std::min(target.find('/', i), target.size());
    if (j > i) out.emplace_back(target.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// Triton's binary tensor data extension: Inference-Header-Content-Length = the JSON part's bytes (absent: all JSON).
std::optional<std::size_t> binary_header_length(const http::request<http::string_body>& req) {
  const auto it = req.find("Inference-Header-Content-Length");
  if (it == req.end()) return std::nullopt;
  const std::string v(it->value());
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || v.empty())
    throw RequestError(400, "Inference-Header-Content-Length must be a byte count, got '" + v.substr(0, 32) + "'");
  return n;
}

void Server::handle(const std::shared_ptr<Session>& session, const http::request<http::string_body>& req) {
  bool pending = false;
  Reply reply;
  try {
    reply = route(session, req, pending);
  } catch (const RequestError& e) {
    reply = error_reply(e.status(), e.what());
  } catch (const std::exception& e) {
    reply = error_reply(500, e.what());
  }
  if (!pending) session->finish(std::move(reply));
}

Reply Server::route(const std::shared_ptr<Session>& session, const http::request<http::string_body>& req,
                    bool& pending) {
  const std::vector<std::string> p = segments(std::string_view(req.target().data(), req.target().size()));
  const bool get = req.method() == http::verb::get, post = req.method() == http::verb::post;
  if (p.size() == 3 && p[0] == "v2" && p[1] == "health" && (p[2] == "live" || p[2] == "ready")) {
    if (!get) return error_reply(405, "use GET on " + std::string(req.target()));
    if (p[2] == "ready" && stopping_) return json_reply(503, {{"ready", false}});
    return json_reply(200, {{p[2], true}});
  }
  if (!options_.auth_token.empty()) {
    const auto auth = req[http::field::authorization];
    const std::string expected = "Bearer " + options_.auth_token;
    bool same = auth.size() == expected.size();
    for (std::size_t i = 0; i < expected.size(); ++i) same &= i < auth.size() && auth[i] == expected[i];
    if (!same) {
      Reply r = error_reply(401, "missing or wrong bearer token (Authorization: Bearer <token>)");
      r.unauthorized = true;
      return r;
    }
  }
  if (const auto enc = req[http::field::content_encoding]; !enc.empty() && enc != "identity")
    return error_reply(415, "Content-Encoding '" + std::string(enc.substr(0, 32)) +
                                "' is not supported: send the request body uncompressed");
  if (p.size() == 1 && p[0] == "metrics") {
    Reply r = text_reply(200, prometheus_text(metrics_));
    r.content_type = "text/plain; version=0.0.4";
    return r;
  }
  if (p.size() == 1 && p[0] == "v2") {
    return json_reply(
        200,
        {{"name", "bertx"}, {"version", BERTX_VERSION_STRING}, {"extensions", json::array({"binary_tensor_data"})}});
  }
  // /v2/models/NAME[/versions/V][/ready|/infer], /v1/models/NAME/<text endpoint>
  if (p.size() >= 3 && (p[0] == "v2" || p[0] == "v1") && p[1] == "models") {
    Reply r;
    Model* m = find(p[2], r);
    if (!m) return r;
    std::vector<std::string> rest(p.begin() + 3, p.end());
    if (p[0] == "v2" && rest.size() >= 2 && rest[0] == "versions") {
      if (rest[1] != "1") return error_reply(404, "model '" + p[2] + "' has version 1 only");
      rest.erase(rest.begin(), rest.begin() + 2);
    }
    const ServedModel& sm = m->served.model;
    if (p[0] == "v2" && rest.empty()) {
      if (!get) return error_reply(405, "use GET for model metadata");
      return json_reply(200, model_metadata(sm));
    }
    if (p[0] == "v2" && rest.size() == 1 && rest[0] == "ready")
      return json_reply(stopping_ ? 503 : 200, {{"name", sm.name}, {"ready", !stopping_}});
    // A bad inference request counts as the model's failure.
    auto failed = [&](const RequestError& e) {
      Reply f = error_reply(e.status(), e.what());
      f.model = sm.name, f.inference = true;
      return f;
    };
    if (p[0] == "v2" && rest.size() == 1 && rest[0] == "infer") {
      if (!post) return error_reply(405, "use POST for inference");
      try {
        InferRequest ir = parse_infer_request(req.body(), sm.limits, binary_header_length(req));
        return infer(session, *m, nullptr, std::move(ir.sequences), std::move(ir.id),
                     {std::move(ir.outputs), ir.binary_output}, pending);
      } catch (const RequestError& e) {
        return failed(e);
      }
    }
    if (p[0] == "v1" && rest.size() == 1) {
      for (const auto& t : m->served.text)
        if (t.kind == rest[0]) {
          if (!post) return error_reply(405, "use POST on " + std::string(req.target()));
          try {
            auto [sequences, answer] = t.prepare(req.body());
            return infer(session, *m, answer, std::move(sequences), "", {}, pending);
          } catch (const RequestError& e) {
            return failed(e);
          }
        }
      return error_reply(
          404, "model '" + sm.name + "' (" + sm.task + ") has no text endpoint '" + rest[0].substr(0, 64) + "'" +
                   (m->served.text.empty()
                        ? " (text needs a vocab.txt or tokenizer.json in its folder and its task's plugin)"
                        : ""));
    }
  }
  return error_reply(404, "no endpoint " + std::string(req.target().substr(0, 128)));
}

Reply Server::infer(const std::shared_ptr<Session>& session, Model& m,
                    const std::function<std::string(const std::vector<OutputTensor>&)>& answer, Sequences sequences,
                    std::string id, OutputChoice outputs, bool& pending) {
  Reply base;
  base.model = m.served.model.name, base.inference = true;
  if (stopping_) {
    base.status = 503, base.body = error_json("the server is stopping"), base.retry_after = true;
    return base;
  }
  ++in_flight_;
  const std::string name = m.served.model.name;
  const bool accepted =
      m.batcher->submit(std::move(sequences), [this, session, base, answer, id, outputs, name](JobResult job) mutable {
        // On the batcher thread: the JSON body is built here, the write is posted to the io thread.
        Reply r = base;
        if (!job.error.empty()) {
          r.status = 500, r.body = error_json("inference failed: " + job.error);
        } else if (answer) {
          try {
            r.body = answer(job.outputs);
          } catch (const std::exception& e) {
            r.status = 500, r.body = error_json(e.what());
          }
        } else {
          // The asked-for outputs in the request's order, or every output of the model.
          std::vector<OutputTensor> chosen;
          std::vector<bool> binary;
          if (outputs.named.empty()) {
            chosen = std::move(job.outputs);
            binary.assign(chosen.size(), outputs.binary_default);
          }
          for (const auto& want : outputs.named)
            for (const auto& o : job.outputs)
              if (o.name == want.name) chosen.push_back(o), binary.push_back(want.binary);
          InferResponse body = infer_response(name, id, chosen, binary);
          r.body = std::move(body.body), r.json_size = body.json_size;
        }
        job.outputs.clear();
        r.job = std::move(job);
        net::post(io_, [this, session, r = std::move(r)]() mutable {
          session->finish(std::move(r));
          --in_flight_;
        });
      });
  if (!accepted) {
    --in_flight_;
    base.status = 503, base.retry_after = true;
    base.body = error_json("the queue of model '" + name + "' is full (" +
                           std::to_string(options_.batching.max_queue_size) + " requests); retry later");
    return base;
  }
  pending = true;
  return base;
}

void Server::finished(const Reply& reply, Clock::time_point received) {
  if (!reply.inference) return;
  auto it = metrics_.find(reply.model);
  if (it == metrics_.end()) return;
  ModelMetrics& m = *it->second;
  if (reply.status != 200) {
    m.request_failure.fetch_add(1);
    return;
  }
  const auto us = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - received).count());
  m.request_success.fetch_add(1);
  m.request_duration_us.fetch_add(us);
  m.observe_latency(us);
}

void Server::log(const http::request<http::string_body>& req, const Reply& reply, Clock::time_point received) {
  if (!options_.log_requests) return;
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - received).count();
  json j{{"time_unix_ms",
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count()},
         {"method", std::string(req.method_string())},
         {"path", std::string(req.target())},
         {"status", reply.status},
         {"duration_us", us}};
  if (!reply.model.empty()) j["model"] = reply.model;
  if (reply.inference && reply.job.batch_sequences) {
    j["queue_us"] = reply.job.queue_us, j["compute_us"] = reply.job.compute_us;
    j["batch_sequences"] = reply.job.batch_sequences;
  }
  if (reply.status >= 400) j["error"] = json::parse(reply.body, nullptr, false).value("error", "");
  std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  std::fflush(stdout);
}

}  // namespace

void run_server(std::vector<Served> models, const ServerOptions& options,
                const std::function<void(const std::string&)>& started) {
  Server server(std::move(models), options);
  const tcp::endpoint at = server.listen();
  started("http://" + at.address().to_string() + ":" + std::to_string(at.port()));
  server.run();
}

}  // namespace bertx::serve
