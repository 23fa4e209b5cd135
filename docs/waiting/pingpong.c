#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
// Rank 0 computes COMPUTE_S seconds, sends 64 bytes, receives the reply;
// rank 1 waits in MPI_Recv meanwhile: one long wait per iteration.
// Usage: pingpong ITERATIONS COMPUTE_S
#include <unistd.h>
int main(int argc,char**argv){
  MPI_Init(&argc,&argv);int r;MPI_Comm_rank(MPI_COMM_WORLD,&r);
  int iters=argc>1?atoi(argv[1]):200; double comp=argc>2?atof(argv[2]):0.02;
  char buf[64]={0};
  for(int i=0;i<iters;i++){
    if(r==0){double t=now();while(now()-t<comp);MPI_Send(buf,64,MPI_CHAR,1,0,MPI_COMM_WORLD);MPI_Recv(buf,64,MPI_CHAR,1,0,MPI_COMM_WORLD,MPI_STATUS_IGNORE);}
    else{MPI_Recv(buf,64,MPI_CHAR,0,0,MPI_COMM_WORLD,MPI_STATUS_IGNORE);MPI_Send(buf,64,MPI_CHAR,0,0,MPI_COMM_WORLD);}
  }
  if(r==1)fprintf(stderr,"rank1 pid %d done\n",getpid());
  MPI_Finalize();return 0;}
