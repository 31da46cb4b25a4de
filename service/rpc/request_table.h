// The table a request is checked against, from the store's TableInfo.
#ifndef EMB_SERVICE_RPC_REQUEST_TABLE_H_
#define EMB_SERVICE_RPC_REQUEST_TABLE_H_

#include "service/rpc/request_validation.h"
#include "service/store/embedding_store.h"

namespace emb::service {

inline RequestTable RequestTableOf(const TableInfo& info) {
  return RequestTable{info.name,
                      info.ids,
                      info.dim,
                      info.dtype,
                      info.shard.has_value() ? info.shard->index : 0,
                      info.shard.has_value() ? info.shard->count : 0};
}

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_REQUEST_TABLE_H_
